package worklease

import (
	"math"
	"math/rand/v2"
	"time"
)

// Backoff computes how long an orchestrator waits before retrying, as
// exponential backoff with jitter: Base * 2^attempts, capped at Max, plus a
// random extra of up to Jitter times that, so that retries of many offsets
// spread out instead of arriving together. The Manager never waits; this is
// for the caller.
//
// The zero Backoff is ready to use, with DefaultBackoffBase,
// DefaultBackoffMax and DefaultBackoffJitter.
type Backoff struct {
	Base   time.Duration // the delay for 0 attempts, doubled for each; zero means DefaultBackoffBase
	Max    time.Duration // cap on the delay before jitter; zero means DefaultBackoffMax
	Jitter float64       // largest random extra, as a fraction of the delay; zero means DefaultBackoffJitter, negative means none
}

// The zero Backoff's settings.
const (
	DefaultBackoffBase   = 100 * time.Millisecond
	DefaultBackoffMax    = time.Minute
	DefaultBackoffJitter = 0.1
)

// Delay returns the wait after attempts failed attempts: pass RetryCount
// from FailResult or AcquireResult, so the first retry waits 2*Base. A
// negative count is treated as zero. Delay is safe for concurrent use.
func (b Backoff) Delay(attempts int) time.Duration {
	base, ceiling, jitter := b.Base, b.Max, b.Jitter
	if base <= 0 {
		base = DefaultBackoffBase
	}
	if ceiling <= 0 {
		ceiling = DefaultBackoffMax
	}
	if jitter == 0 {
		jitter = DefaultBackoffJitter
	}
	d := ceiling
	if shift := max(attempts, 0); shift < 63 && base <= ceiling>>shift {
		d = base << shift
	}
	if jitter > 0 {
		extra := rand.Float64() * jitter * float64(d)
		if extra >= float64(math.MaxInt64-d) {
			return math.MaxInt64
		}
		d += time.Duration(extra)
	}
	return d
}
