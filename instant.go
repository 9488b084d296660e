package worklease

import (
	"math"
	"time"
)

// An instant is a moment as a Manager keeps it: nanoseconds since the Unix
// epoch in one word, where a time.Time takes three and a pointer. Leases,
// dead letters and the expiry index hold instants; the API speaks
// time.Time, converting at the edge. Zero means none (no expiry, no time
// recorded). Instants span the years 1678 to 2262; times outside are
// clamped to the nearest end.
type instant int64

// instantOf returns t as an instant; the zero Time is the zero instant.
func instantOf(t time.Time) instant {
	if t.IsZero() {
		return 0
	}
	// Comparing seconds first is quicker than Before and After, which
	// instants near either end still need.
	if sec := t.Unix(); sec <= minInstantSec || sec >= maxInstantSec {
		switch {
		case t.Before(minInstantTime):
			return math.MinInt64
		case t.After(maxInstantTime):
			return math.MaxInt64
		}
	}
	if n := t.UnixNano(); n != 0 {
		return instant(n)
	}
	return 1 // the Unix epoch itself, which would read as none; a nanosecond is no error
}

var (
	minInstantTime = time.Unix(0, math.MinInt64)
	maxInstantTime = time.Unix(0, math.MaxInt64)
)

// The whole seconds of the first and last instants.
const (
	minInstantSec = math.MinInt64 / int64(time.Second)
	maxInstantSec = math.MaxInt64 / int64(time.Second)
)

// in returns i as a time.Time in loc; the zero instant is the zero Time.
// It is small enough to inline, so that the zero instant, as a lease that
// never expires has, costs a result no call.
func (i instant) in(loc *time.Location) time.Time {
	if i == 0 {
		return time.Time{}
	}
	return i.time(loc)
}

// time is in of an instant that is not zero.
func (i instant) time(loc *time.Location) time.Time {
	t := time.Unix(0, int64(i)) // in time.Local
	if loc != time.Local {
		t = t.In(loc)
	}
	return t
}

// add returns i+d, saturating instead of wrapping around, and never the
// zero instant, which means none.
func (i instant) add(d time.Duration) instant {
	sum := i + instant(d)
	switch {
	case d > 0 && sum < i:
		return math.MaxInt64
	case d < 0 && sum > i:
		return math.MinInt64
	case sum == 0:
		return 1 // the Unix epoch itself, which would read as none (see instantOf)
	}
	return sum
}

// A timeline reads the system clock cheaply: it anchors the wall clock once
// and then advances it by the monotonic clock, one vDSO call instead of the
// two time.Now makes. Leases then run on monotonic time, which wall-clock
// steps do not disturb, and the times a Manager reports follow the wall
// clock as it stood at New. Its reading of the moment now,
// epoch.add(time.Since(start)), is made in place by Manager.now: one call
// less on every grant.
type timeline struct {
	start time.Time // with a monotonic reading
	epoch instant   // start as an instant
}

func newTimeline() timeline {
	start := time.Now()
	return timeline{start: start, epoch: instantOf(start)}
}
