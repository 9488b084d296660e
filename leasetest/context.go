package leasetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/worklease/worklease"
)

// testContext is the Context area: a call with a done context returns its
// error and changes nothing.
func testContext(t *testing.T, s *Suite) {
	var cases []testCase
	for _, c := range allCalls {
		cases = append(cases, testCase{c.name, func(t *testing.T, s *Suite) {
			s.need(t, c.feature)
			e := s.start(t, worklease.WithLeaseTTL(time.Minute))
			busy(e)
			canceled, cancel := context.WithCancel(e.ctx)
			cancel()
			expired, cancel2 := context.WithDeadline(e.ctx, time.Unix(0, 0))
			defer cancel2()
			for _, d := range []string{"A", "queued", "failed", "new"} {
				for _, ctx := range []context.Context{canceled, expired} {
					before := e.state("new")
					err := c.call(ctx, e.b, d, 1)
					want := ctx.Err()
					if !errors.Is(err, want) {
						t.Fatalf("%s(%q) with a done context: error %v, want one matching %v", c.name, d, err, want)
					}
					mustEqual(t, before, e.state("new"), "%s(%q) with a done context changed the state", c.name, d)
				}
			}
			// A's lease is due: a call that went ahead would revoke it.
			// Leases revokes nothing.
			e.clk.Advance(time.Minute)
			before := e.leases()
			mustErrorIs(t, c.call(canceled, e.b, "A", 1), context.Canceled, "%s with a due lease", c.name)
			mustEqual(t, before, e.leases(), "%s with a done context revoked the due lease", c.name)
		}})
	}
	runCases(t, s, cases)
}
