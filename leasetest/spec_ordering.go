package leasetest

// The ordering scenarios of the queue specification, first written for
// the in-memory Manager and kept here so that every backend runs them.

import (
	"errors"
	"testing"
	"time"

	"github.com/worklease/worklease"
)

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
