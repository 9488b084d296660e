package leasetest

import (
	"errors"
	"testing"

	"github.com/worklease/worklease"
)

// testObserver is the Observer area: the events a backend reports, their
// kinds and order per domain. It is skipped unless Suite.Events.
func testObserver(t *testing.T, s *Suite) {
	if !s.Events {
		t.Skip("the backend reports no events (Suite.Events is false)")
	}
	type ev struct {
		Kind    worklease.EventKind
		Offset  int64
		Attempt int
	}
	evs := func(e *env, d string) []ev {
		var out []ev
		for _, x := range e.rec.of(d) {
			out = append(out, ev{x.Kind, x.Offset, x.Attempt})
		}
		return out
	}
	runCases(t, s, []testCase{
		{"Lifecycle", func(t *testing.T, s *Suite) {
			e := s.startObserved(t, worklease.WithMaxRetries(1))
			tok := e.acquire("A", 1, worklease.Acquired).Token
			e.acquire("A", 2, worklease.Enqueued)
			e.acquire("A", 2, worklease.Enqueued) // a duplicate is no event
			e.fail("A", tok, errors.New("boom"))
			e.fail("A", tok, errors.New("again"))
			tok = e.acquire("A", 2, worklease.Acquired).Token
			e.succeed("A", tok)
			mustEqual(t, []ev{
				{worklease.EventAcquired, 1, 1}, {worklease.EventEnqueued, 2, 0}, {worklease.EventRetrying, 1, 1},
				{worklease.EventDeadLettered, 1, 2}, {worklease.EventAcquired, 2, 1}, {worklease.EventProcessed, 2, 1},
			}, evs(e, "A"))
			got := e.rec.of("A")
			mustEqual(t, "boom", got[2].Cause.Error(), "Retrying's cause")
			mustEqual(t, "again", got[3].Cause.Error(), "DeadLettered's cause")
			mustEqual(t, tok, got[5].Token, "Processed's token")
			for _, x := range got {
				mustEqual(t, "A", x.Domain)
				mustEqual(t, epoch, x.At, "%v: At", x.Kind)
			}
		}},
		{"Rejected", func(t *testing.T, s *Suite) {
			e := s.startObserved(t)
			tok := e.acquire("A", 1, worklease.Acquired).Token
			_, err := e.b.Succeed(e.ctx, "A", worklease.Token{})
			mustSentinel(t, worklease.ErrTokenMismatch, err)
			_, err = e.b.Succeed(e.ctx, "nobody", tok)
			mustSentinel(t, worklease.ErrNoLease, err)
			got := e.rec.of("A")
			mustEqual(t, 2, len(got), "events of A")
			mustErrorIs(t, got[1].Cause, worklease.ErrTokenMismatch, "Rejected's cause")
			got[1].Cause = nil
			mustEqual(t, worklease.Event{Kind: worklease.EventRejected, Domain: "A", Offset: 1, At: epoch}, got[1])
			mustEqual(t, []string{"A"}, e.rec.domains(), "an unknown domain is no event")
		}},
		{"ExpiryAndRequeue", func(t *testing.T, s *Suite) {
			e := s.startObserved(t, worklease.WithLeaseTTL(ttl), worklease.WithMaxRetries(1))
			tok := e.acquire("A", 1, worklease.Acquired).Token
			e.extend("A", tok, 2*ttl)
			e.clk.Advance(2 * ttl)
			e.reap()
			e.acquire("A", 1, worklease.Acquired)
			e.clk.Advance(ttl)
			e.inspect("A")
			mustEqual(t, []ev{
				{worklease.EventAcquired, 1, 1}, {worklease.EventExtended, 1, 1}, {worklease.EventExpired, 1, 1},
				{worklease.EventRequeued, 1, 1}, {worklease.EventAcquired, 1, 2}, {worklease.EventExpired, 1, 2},
				{worklease.EventDeadLettered, 1, 2},
			}, evs(e, "A"))
			got := e.rec.of("A")
			mustEqual(t, tok, got[2].Token, "Expired's token")
			mustErrorIs(t, got[6].Cause, worklease.ErrLeaseExpired, "DeadLettered's cause")
		}},
		{"Admin", func(t *testing.T, s *Suite) {
			e := s.startObserved(t, worklease.WithBestEffortOrdering())
			tok := e.acquire("A", 1, worklease.Acquired).Token
			e.acquire("A", 2, worklease.Enqueued)
			e.acquire("A", 3, worklease.Enqueued)
			e.forceRelease("A")
			e.acquire("A", 3, worklease.Acquired)
			e.kill("A", 2, "poison")
			e.redrive("A", 2)
			e.pause("A")
			e.resume("A")
			_, err := e.b.Succeed(e.ctx, "A", tok)
			mustSentinel(t, worklease.ErrLeaseRevoked, err)
			mustEqual(t, []ev{
				{worklease.EventAcquired, 1, 1}, {worklease.EventEnqueued, 2, 0}, {worklease.EventEnqueued, 3, 0},
				{worklease.EventReleased, 1, 1}, {worklease.EventRequeued, 1, 1}, {worklease.EventOutOfOrder, 3, 0},
				{worklease.EventAcquired, 3, 1}, {worklease.EventKilled, 2, 0}, {worklease.EventDeadLettered, 2, 0},
				{worklease.EventRedriven, 2, 0}, {worklease.EventPaused, -1, 0}, {worklease.EventResumed, -1, 0},
				{worklease.EventRejected, 3, 0},
			}, evs(e, "A"))
			e2 := s.startObserved(t, worklease.WithParkOnDeadLetter(), worklease.WithMaxRetries(0))
			e2.fail("B", e2.acquire("B", 1, worklease.Acquired).Token, errors.New("x"))
			e2.resume("B")
			e2.forget("B")
			mustEqual(t, []worklease.EventKind{worklease.EventAcquired, worklease.EventDeadLettered, worklease.EventPaused,
				worklease.EventResumed, worklease.EventForgotten}, e2.rec.kinds("B"))
		}},
		{"NoEventForRefusals", func(t *testing.T, s *Suite) {
			e := s.startObserved(t)
			e.acquire("A", 1, worklease.Acquired)
			_, _ = e.b.TryAcquire(e.ctx, "A", -1)
			_, _ = e.b.Kill(e.ctx, "", 1, "x")
			_, _ = e.b.Extend(e.ctx, "A", worklease.Token{}, 0)
			_, _ = e.b.Redrive(e.ctx, "A", 5)
			_ = e.b.Forget(e.ctx, "A")
			mustEqual(t, []worklease.EventKind{worklease.EventAcquired}, e.rec.kinds("A"))
		}},
	})
}
