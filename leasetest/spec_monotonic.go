package leasetest

// Scenarios of WithMonotonicOffsets, first written for the in-memory
// Manager and kept here so that every backend runs them.

import (
	"math"
	"testing"
	"time"

	"github.com/worklease/worklease"
)

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
