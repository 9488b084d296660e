package worklease

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestInstantRoundTrip(t *testing.T) {
	zone := time.FixedZone("UTC+5", 5*3600)
	for _, tm := range []time.Time{
		time.Date(2026, 11, 22, 4, 20, 37, 123456789, time.UTC),
		time.Date(1969, 12, 31, 23, 59, 59, 999999999, zone),
		time.Unix(0, 1),
		time.Unix(0, math.MaxInt64),
		time.Unix(0, math.MinInt64),
	} {
		i := instantOf(tm)
		assert.NotZero(t, i, "%v must not read as none", tm)
		got := i.in(zone)
		assert.True(t, got.Equal(tm), "%v came back as %v", tm, got)
		assert.Equal(t, zone, got.Location())
	}
}

func TestInstantEdges(t *testing.T) {
	assert.Zero(t, instantOf(time.Time{}), "the zero Time is none")
	assert.True(t, instant(0).in(time.UTC).IsZero(), "none is the zero Time")
	// The Unix epoch itself is a real time: it reads a nanosecond late
	// rather than as none.
	assert.Equal(t, instant(1), instantOf(time.Unix(0, 0)))
	// Times beyond what int64 nanoseconds hold are clamped, keeping order.
	assert.Equal(t, instant(math.MaxInt64), instantOf(time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC)))
	assert.Equal(t, instant(math.MinInt64), instantOf(time.Date(1000, 1, 1, 0, 0, 0, 0, time.UTC)))
}

func TestInstantAddSaturates(t *testing.T) {
	assert.Equal(t, instant(15), instant(10).add(5))
	assert.Equal(t, instant(5), instant(10).add(-5))
	assert.Equal(t, instant(math.MaxInt64), instant(math.MaxInt64-1).add(2))
	assert.Equal(t, instant(math.MaxInt64), instant(1).add(time.Duration(math.MaxInt64)))
	assert.Equal(t, instant(math.MinInt64), instant(math.MinInt64+1).add(-2))
}

func TestTimelineFollowsTheClock(t *testing.T) {
	tl := &Manager{timeline: newTimeline()} // no Clock: it reads the timeline
	for range 3 {
		before := instantOf(time.Now())
		now := tl.now()
		after := instantOf(time.Now())
		// Without a wall-clock step the timeline reads the wall clock (it
		// follows the monotonic clock, which NTP slews alike); allow a
		// millisecond either side for rounding between the two clocks.
		assert.GreaterOrEqual(t, now, before-instant(time.Millisecond))
		assert.LessOrEqual(t, now, after+instant(time.Millisecond))
		time.Sleep(2 * time.Millisecond)
	}
	a := tl.now()
	time.Sleep(2 * time.Millisecond)
	assert.GreaterOrEqual(t, tl.now()-a, instant(2*time.Millisecond), "advances with time")
}
