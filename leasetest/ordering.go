package leasetest

import (
	"errors"
	"testing"
	"time"

	"github.com/worklease/worklease"
)

// drain works through d's backlog with SucceedNext from the lease under
// tok, and returns the offsets in the order they were granted.
func (e *env) drain(d string, tok worklease.Token) []int64 {
	e.t.Helper()
	var order []int64
	for {
		res := e.succeedNext(d, tok)
		if res.Status != worklease.NextAcquired {
			mustEqual(e.t, worklease.NoBacklog, res.Status, "SucceedNext(%q)", d)
			return order
		}
		order = append(order, res.Lease.Offset)
		tok = res.Lease.Token
	}
}

// testOrdering is the Ordering area: FIFO, LIFO, best-effort ordering, and
// the front of the line for offsets that come back.
func testOrdering(t *testing.T, s *Suite) {
	runCases(t, s, []testCase{
		{"FIFO", func(t *testing.T, s *Suite) {
			e := s.start(t)
			tok := e.acquire("A", 1, worklease.Acquired).Token
			for _, off := range []int64{5, 3, 5, 4, 3, 2, 5} {
				e.acquire("A", off, worklease.Enqueued)
			}
			mustEqual(t, []int64{5, 3, 4, 2}, e.inspect("A").Backlog, "first-enqueued order, once each")
			mustEqual(t, []int64{5, 3, 4, 2}, e.drain("A", tok))
		}},
		{"LIFO", func(t *testing.T, s *Suite) {
			e := s.start(t, worklease.WithOrdering(worklease.LIFO))
			tok := e.acquire("A", 1, worklease.Acquired).Token
			for _, off := range []int64{5, 3, 4, 2} {
				e.acquire("A", off, worklease.Enqueued)
			}
			e.acquire("A", 3, worklease.Enqueued) // a duplicate does not move
			mustEqual(t, []int64{2, 4, 3, 5}, e.inspect("A").Backlog)
			mustEqual(t, []int64{2, 4, 3, 5}, e.drain("A", tok))
		}},
		{"StrictOrder", func(t *testing.T, s *Suite) {
			e := s.start(t)
			tok := e.acquire("A", 1, worklease.Acquired).Token
			e.acquire("A", 2, worklease.Enqueued)
			e.acquire("A", 3, worklease.Enqueued)
			mustEqual(t, worklease.SucceedResult{Status: worklease.NextHint, Next: 2}, e.succeed("A", tok))
			for _, off := range []int64{3, 4, 0} {
				e.refused(worklease.ErrBacklogOrder, func() error { _, err := e.b.TryAcquire(e.ctx, "A", off); return err })
			}
			e.acquire("A", 1, worklease.AlreadyProcessed) // terminal answers are no order error
			e.acquire("A", 2, worklease.Acquired)
		}},
		{"BestEffort", func(t *testing.T, s *Suite) {
			e := s.start(t, worklease.WithBestEffortOrdering())
			tok := e.acquire("A", 1, worklease.Acquired).Token
			e.acquire("A", 2, worklease.Enqueued)
			e.acquire("A", 3, worklease.Enqueued)
			e.succeed("A", tok)
			tok = e.acquire("A", 3, worklease.Acquired).Token // out of turn, out of the backlog
			mustEqual(t, []int64{2}, e.inspect("A").Backlog)
			e.succeed("A", tok)
			tok = e.acquire("A", 9, worklease.Acquired).Token // never queued
			mustEqual(t, []int64{2}, e.drain("A", tok))
		}},
		{"ForceReleasedGoesFirst", func(t *testing.T, s *Suite) {
			for _, o := range []worklease.Ordering{worklease.FIFO, worklease.LIFO} {
				e := s.start(t, worklease.WithOrdering(o))
				e.acquire("A", 1, worklease.Acquired)
				e.acquire("A", 2, worklease.Enqueued)
				e.acquire("A", 3, worklease.Enqueued)
				mustEqual(t, worklease.Head{Next: 1, HasNext: true}, e.forceRelease("A"), "%v: ForceRelease", o)
				head := e.inspect("A").Backlog[0]
				mustEqual(t, int64(1), head, "%v: the released offset is first in line", o)
			}
		}},
		{"RedrivenGoesFirst", func(t *testing.T, s *Suite) {
			for _, o := range []worklease.Ordering{worklease.FIFO, worklease.LIFO} {
				e := s.start(t, worklease.WithOrdering(o), worklease.WithMaxRetries(0))
				tok := e.acquire("A", 1, worklease.Acquired).Token
				e.acquire("A", 2, worklease.Enqueued)
				e.acquire("A", 3, worklease.Enqueued)
				e.fail("A", tok, nil)
				mustEqual(t, worklease.Head{Next: 1, HasNext: true}, e.redrive("A", 1), "%v: Redrive of an idle domain", o)
				backlog := e.inspect("A").Backlog
				mustEqual(t, int64(1), backlog[0], "%v: the redriven offset is first in line", o)
				res := e.acquire("A", 1, worklease.Acquired)
				mustEqual(t, 0, res.RetryCount, "%v: a redriven offset starts afresh", o)
			}
		}},
		{"ExpiredGoesFirst", func(t *testing.T, s *Suite) {
			e := s.start(t, worklease.WithOrdering(worklease.LIFO), worklease.WithLeaseTTL(ttl))
			e.acquire("A", 1, worklease.Acquired)
			e.acquire("A", 2, worklease.Enqueued)
			e.acquire("A", 3, worklease.Enqueued)
			e.clk.Advance(ttl)
			mustEqual(t, []int64{1, 3, 2}, e.inspect("A").Backlog, "the expired offset goes before the backlog, whatever the ordering")
		}},
	}, orderingSpecCases)
}

// orderingSpecCases are the area's cases that came from the root package's tests.
var orderingSpecCases = []testCase{
	{"DefaultFIFOOrdering", specDefaultFIFOOrdering},
	{"LIFOOrdering", specLIFOOrdering},
	{"StrictOrderingGuarantee", specStrictOrderingGuarantee},
}

// The queue scenario "Default FIFO ordering": a queue created without an ordering
// mode gives consumers messages in the order they were enqueued.
func specDefaultFIFOOrdering(t *testing.T, s *Suite) {
	e := s.start(t)
	first := e.acquire("queue", 1, worklease.Acquired)
	for _, off := range []int64{5, 3, 9, 2, 7} {
		e.acquire("queue", off, worklease.Enqueued)
	}
	mustEqual(t, []int64{5, 3, 9, 2, 7}, e.drainHints("queue", first.Token))
}

// The queue scenario "LIFO ordering": with LIFO the most recently enqueued message
// comes first, including one that arrives while the backlog is drained.
func specLIFOOrdering(t *testing.T, s *Suite) {
	e := s.start(t, worklease.WithOrdering(worklease.LIFO))
	first := e.acquire("queue", 1, worklease.Acquired)
	for _, off := range []int64{5, 3, 9} {
		e.acquire("queue", off, worklease.Enqueued)
	}
	e.acquire("queue", 5, worklease.Enqueued) // a duplicate keeps its place
	mustEqual(t, []int64{9, 3, 5}, e.inspect("queue").Backlog)

	sres, err := e.b.Succeed(e.ctx, "queue", first.Token)
	mustNoError(t, err)
	mustEqual(t, worklease.SucceedResult{Status: worklease.NextHint, Next: 9}, sres)
	_, err = e.b.TryAcquire(e.ctx, "queue", 5)
	mustErrorIs(t, err, worklease.ErrBacklogOrder, "LIFO is as strict as FIFO")
	nine := e.acquire("queue", 9, worklease.Acquired)
	e.acquire("queue", 8, worklease.Enqueued) // the newest
	mustEqual(t, []int64{8, 3, 5}, e.drainHints("queue", nine.Token))
}

// The queue scenario "Strict ordering guarantee": under FIFO (and LIFO) messages are
// delivered strictly in order even across retries and visibility timeouts:
// an offset whose lease expired is granted again before anything queued
// after it, and nothing else may be acquired meanwhile.
func specStrictOrderingGuarantee(t *testing.T, s *Suite) {
	const ttl = 30 * time.Second
	for _, o := range []worklease.Ordering{worklease.FIFO, worklease.LIFO} {
		t.Run(o.String(), func(t *testing.T) {
			t.Parallel()
			e := s.start(t, worklease.WithOrdering(o), worklease.WithLeaseTTL(ttl), worklease.WithMaxRetries(5))
			first := e.acquire("queue", 1, worklease.Acquired)
			e.acquire("queue", 2, worklease.Enqueued)
			e.acquire("queue", 3, worklease.Enqueued)

			// A retry keeps the lease: later offsets still wait.
			fres, err := e.b.Fail(e.ctx, "queue", first.Token, errors.New("transient"))
			mustNoError(t, err)
			mustEqual(t, worklease.RetryScheduled, fres.Status)
			e.acquire("queue", 2, worklease.Enqueued)

			// A visibility timeout puts 1 back at the front of the line.
			e.clk.Advance(ttl)
			for _, off := range []int64{2, 3} {
				_, err = e.b.TryAcquire(e.ctx, "queue", off)
				var orderErr *worklease.BacklogOrderError
				mustTrue(t, errors.As(err, &orderErr), "offset %d: %v is no *BacklogOrderError", off, err)
				mustEqual(t, worklease.BacklogOrderError{Domain: "queue", Expected: 1, Got: off}, *orderErr)
			}
			again := e.acquire("queue", 1, worklease.Acquired)
			mustEqual(t, 2, again.RetryCount, "one Fail and one expiry")

			want := []int64{2, 3}
			if o == worklease.LIFO {
				want = []int64{3, 2}
			}
			mustEqual(t, want, e.drainHints("queue", again.Token))
		})
	}
}
