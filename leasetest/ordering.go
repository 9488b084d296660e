package leasetest

import (
	"testing"

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
