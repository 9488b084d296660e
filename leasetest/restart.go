package leasetest

import (
	"errors"
	"testing"
	"time"

	"github.com/worklease/worklease"
)

// testRestart is the Restart area: every state survives Reopen. It is
// skipped unless Suite.Reopen is set.
func testRestart(t *testing.T, s *Suite) {
	if s.Reopen == nil {
		t.Skip("the backend cannot be reopened (Suite.Reopen is nil)")
	}
	runCases(t, s, []testCase{
		{"States", func(t *testing.T, s *Suite) {
			e := s.start(t, worklease.WithLeaseTTL(time.Minute), worklease.WithMaxRetries(2))
			tok := e.acquire("leased", 1, worklease.Acquired).Token
			e.fail("leased", tok, errors.New("boom"))
			e.acquire("leased", 2, worklease.Enqueued)
			e.acquire("leased", 3, worklease.Enqueued)
			e.clk.Advance(time.Second)
			e.extend("leased", tok, 2*time.Minute)
			e.process("done", 1)
			e.process("done", 4)
			e.kill("failed", 3, "poison")
			e.pause("paused")
			e.acquire("paused", 7, worklease.Enqueued)
			released := e.acquire("released", 1, worklease.Acquired).Token
			e.fail("released", released, nil)
			e.forceRelease("released")
			e.process("forgotten", 1)
			e.forget("forgotten")
			before := e.state("forgotten")

			e.reopen()
			mustEqual(t, before, e.state("forgotten"), "the state after a restart")
			// Tokens keep their meaning: the holder finishes, the revoked
			// token is still refused, fences carry on.
			_, err := e.b.Succeed(e.ctx, "released", released)
			mustSentinel(t, worklease.ErrLeaseRevoked, err, "the released lease's holder after a restart")
			res := e.acquire("released", 1, worklease.Acquired)
			mustEqual(t, 1, res.RetryCount, "attempts carried across a restart")
			mustEqual(t, epoch.Add(time.Second), res.AcquiredAt, "first grant carried across a restart")
			mustTrue(t, res.Token.Fence() > released.Fence(), "fence after a restart %d, before %d", res.Token.Fence(), released.Fence())
			mustEqual(t, worklease.SucceedResult{Status: worklease.NextHint, Next: 2}, e.succeed("leased", tok))
			e.acquire("done", 4, worklease.AlreadyProcessed)
			e.acquire("failed", 3, worklease.AlreadyFailed)
			e.acquire("paused", 8, worklease.Enqueued)
			again := e.acquire("forgotten", 1, worklease.Acquired)
			mustTrue(t, again.Token.Fence() > 1, "fences of a forgotten domain after a restart")
		}},
		{"Expiry", func(t *testing.T, s *Suite) {
			e := s.start(t, worklease.WithLeaseTTL(ttl))
			tok := e.acquire("A", 1, worklease.Acquired).Token
			e.reopen()
			e.clk.Advance(ttl)
			mustEqual(t, []worklease.Expiry{{Domain: "A", Offset: 1, Token: tok, Attempts: 1, Head: worklease.Head{Next: 1, HasNext: true}}}, e.reap())
			e.reopen()
			_, err := e.b.Succeed(e.ctx, "A", tok)
			mustSentinel(t, worklease.ErrLeaseExpired, err, "the expired lease's holder after a restart")
		}},
		{"Monotonic", func(t *testing.T, s *Suite) {
			e := s.start(t, worklease.WithMonotonicOffsets(), worklease.WithMaxRetries(0))
			e.process("A", 10)
			e.fail("A", e.acquire("A", 12, worklease.Acquired).Token, nil)
			e.process("A", 20)
			before := e.state()
			e.reopen()
			mustEqual(t, before, e.state(), "the state after a restart")
			e.acquire("A", 15, worklease.AlreadyProcessed)
			e.acquire("A", 12, worklease.AlreadyFailed)
		}},
		{"SucceedNextAcrossRestart", func(t *testing.T, s *Suite) {
			e := s.start(t, worklease.WithOrdering(worklease.LIFO))
			tok := e.acquire("A", 1, worklease.Acquired).Token
			for off := int64(2); off <= 5; off++ {
				e.acquire("A", off, worklease.Enqueued)
			}
			res := e.succeedNext("A", tok)
			e.reopen()
			mustEqual(t, []int64{4, 3, 2}, e.drain("A", res.Lease.Token))
		}},
	})
}
