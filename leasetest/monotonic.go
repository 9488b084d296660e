package leasetest

import (
	"math"
	"testing"
	"time"

	"github.com/worklease/worklease"
)

// process acquires and succeeds off in d.
func (e *env) process(d string, off int64) worklease.SucceedResult {
	e.t.Helper()
	return e.succeed(d, e.acquire(d, off, worklease.Acquired).Token)
}

// testMonotonic is the Monotonic area: WithMonotonicOffsets.
func testMonotonic(t *testing.T, s *Suite) {
	mono := worklease.WithMonotonicOffsets()
	runCases(t, s, []testCase{
		{"SparseOffsets", func(t *testing.T, s *Suite) {
			e := s.start(t, mono)
			for _, off := range []int64{3, 17, 42} {
				e.process("user-1", off)
			}
			for _, off := range []int64{0, 3, 10, 42} {
				e.acquire("user-1", off, worklease.AlreadyProcessed)
			}
			mustEqual(t, worklease.DomainInfo{Processed: 43}, e.inspect("user-1"))
			e.acquire("user-1", 43, worklease.Acquired)
		}},
		{"ExactByDefault", func(t *testing.T, s *Suite) {
			e := s.start(t)
			e.process("A", 3)
			e.process("A", 17)
			mustEqual(t, worklease.DomainInfo{Processed: 2}, e.inspect("A"))
			e.acquire("A", 10, worklease.Acquired)
		}},
		{"FailedBelowHighWater", func(t *testing.T, s *Suite) {
			e := s.start(t, mono, worklease.WithMaxRetries(0))
			e.fail("A", e.acquire("A", 5, worklease.Acquired).Token, nil)
			e.process("A", 9)
			e.acquire("A", 5, worklease.AlreadyFailed)
			mustEqual(t, worklease.DomainInfo{Processed: 9, Failed: 1}, e.inspect("A"))
			mustEqual(t, worklease.Head{Next: 5, HasNext: true}, e.redrive("A", 5))
			mustEqual(t, worklease.DomainInfo{Backlog: []int64{5}, Processed: 9}, e.inspect("A"))
			e.process("A", 5)
			mustEqual(t, worklease.DomainInfo{Processed: 10}, e.inspect("A"))
		}},
		{"QueuedBelowHighWater", func(t *testing.T, s *Suite) {
			e := s.start(t, mono, worklease.WithOrdering(worklease.LIFO))
			tok := e.acquire("A", 1, worklease.Acquired).Token
			e.acquire("A", 2, worklease.Enqueued)
			e.acquire("A", 8, worklease.Enqueued)
			res := e.succeedNext("A", tok)
			mustEqual(t, int64(8), res.Lease.Offset)
			e.succeed("A", res.Lease.Token)
			mustEqual(t, worklease.DomainInfo{Backlog: []int64{2}, Processed: 8}, e.inspect("A"), "2 is queued below the highest offset")
			e.acquire("A", 2, worklease.Acquired)
		}},
		{"KillAhead", func(t *testing.T, s *Suite) {
			e := s.start(t, mono)
			e.process("A", 5)
			e.refused(worklease.ErrOffsetAhead, func() error { _, err := e.b.Kill(e.ctx, "A", 6, "typo"); return err })
			e.refused(worklease.ErrAlreadyProcessed, func() error { _, err := e.b.Kill(e.ctx, "A", 2, "x"); return err })
			e.refused(worklease.ErrOffsetAhead, func() error { _, err := e.b.Kill(e.ctx, "B", 0, "x"); return err })
			tok := e.acquire("A", 6, worklease.Acquired).Token
			e.acquire("A", 20, worklease.Enqueued)
			e.kill("A", 20, "queued")
			e.kill("A", 6, "in flight")
			_, err := e.b.Succeed(e.ctx, "A", tok)
			mustSentinel(t, worklease.ErrLeaseRevoked, err, "the killed lease's holder")
			mustEqual(t, worklease.DomainInfo{Processed: 19, Failed: 2}, e.inspect("A"))
			e.acquire("A", 12, worklease.AlreadyProcessed)
		}},
		{"MaxOffset", func(t *testing.T, s *Suite) {
			e := s.start(t, mono)
			e.process("A", math.MaxInt64)
			mustEqual(t, worklease.DomainInfo{Processed: math.MaxInt64}, e.inspect("A"))
			e.acquire("A", 0, worklease.AlreadyProcessed)
		}},
		{"Forget", func(t *testing.T, s *Suite) {
			e := s.start(t, mono)
			e.process("A", 10)
			e.forget("A")
			e.acquire("A", 3, worklease.Acquired)
		}},
	}, monotonicSpecCases)
}

// monotonicSpecCases are the area's cases that came from the root package's tests.
var monotonicSpecCases = []testCase{
	{"MonotonicExpiryOnLastAttempt", specMonotonicExpiryOnLastAttempt},
	{"MonotonicMaxOffset", specMonotonicMaxOffset},
	{"MonotonicForget", specMonotonicForget},
}

// An expiry on the last attempt dead-letters the offset, which raises hw.
func specMonotonicExpiryOnLastAttempt(t *testing.T, s *Suite) {
	e := s.start(t, worklease.WithMonotonicOffsets(), worklease.WithMaxRetries(0), worklease.WithLeaseTTL(time.Minute))
	e.acquire("A", 20, worklease.Acquired)
	e.clk.Advance(time.Minute)
	e.acquire("A", 5, worklease.AlreadyProcessed) // the call expires 20 first
	e.acquire("A", 20, worklease.AlreadyFailed)
	mustEqual(t, int64(20), e.inspect("A").Processed)
}

// hw may be the largest offset there is: Inspect's count saturates.
func specMonotonicMaxOffset(t *testing.T, s *Suite) {
	e := s.start(t, worklease.WithMonotonicOffsets())
	e.process("A", math.MaxInt64)
	e.acquire("A", math.MaxInt64, worklease.AlreadyProcessed)
	e.acquire("A", 0, worklease.AlreadyProcessed)
	mustEqual(t, int64(math.MaxInt64), e.inspect("A").Processed)
	_, err := e.b.Kill(e.ctx, "A", 0, "x")
	mustErrorIs(t, err, worklease.ErrAlreadyProcessed)
}

// Forget drops hw with the rest of the domain's history.
func specMonotonicForget(t *testing.T, s *Suite) {
	e := s.start(t, worklease.WithMonotonicOffsets())
	e.process("A", 9)
	mustNoError(t, e.b.Forget(e.ctx, "A"))
	e.acquire("A", 3, worklease.Acquired)
}
