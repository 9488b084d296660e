package worklease_test

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/worklease/worklease"
)

// Tests of Backoff, the retry delay it suggests: base * 2^attempts, capped,
// plus a random jitter of up to a tenth of the delay.

func TestBackoffWithoutJitter(t *testing.T) {
	t.Parallel()
	noJitter := worklease.Backoff{Jitter: -1} // defaults for Base and Max
	tests := []struct {
		name     string
		b        worklease.Backoff
		attempts int
		want     time.Duration
	}{
		{"base for 0 attempts", worklease.Backoff{Base: time.Second, Max: time.Hour, Jitter: -1}, 0, time.Second},
		{"doubles once", worklease.Backoff{Base: time.Second, Max: time.Hour, Jitter: -1}, 1, 2 * time.Second},
		{"doubles per attempt", worklease.Backoff{Base: time.Second, Max: time.Hour, Jitter: -1}, 5, 32 * time.Second},
		{"just under the cap", worklease.Backoff{Base: time.Second, Max: 64 * time.Second, Jitter: -1}, 6, 64 * time.Second},
		{"capped", worklease.Backoff{Base: time.Second, Max: 60 * time.Second, Jitter: -1}, 6, 60 * time.Second},
		{"capped far past it", worklease.Backoff{Base: time.Second, Max: 60 * time.Second, Jitter: -1}, 40, 60 * time.Second},
		{"base above the cap", worklease.Backoff{Base: time.Hour, Max: time.Minute, Jitter: -1}, 0, time.Minute},
		{"negative attempts count as zero", worklease.Backoff{Base: time.Second, Max: time.Hour, Jitter: -1}, -3, time.Second},
		{"most negative attempts", worklease.Backoff{Base: time.Second, Max: time.Hour, Jitter: -1}, math.MinInt, time.Second},
		{"62 attempts", worklease.Backoff{Base: 1, Max: time.Duration(math.MaxInt64), Jitter: -1}, 62, 1 << 62},
		{"63 attempts: no overflow", worklease.Backoff{Base: 1, Max: time.Duration(math.MaxInt64), Jitter: -1}, 63, time.Duration(math.MaxInt64)},
		{"huge attempts: no overflow", worklease.Backoff{Base: time.Second, Max: time.Hour, Jitter: -1}, math.MaxInt, time.Hour},
		{"huge base and cap", worklease.Backoff{Base: time.Duration(math.MaxInt64 / 2), Max: time.Duration(math.MaxInt64), Jitter: -1}, 1, time.Duration(math.MaxInt64 / 2 * 2)},
		{"default base", noJitter, 0, worklease.DefaultBackoffBase},
		{"default base doubled", noJitter, 3, 8 * worklease.DefaultBackoffBase},
		{"default cap", noJitter, 30, worklease.DefaultBackoffMax},
		{"negative base means default", worklease.Backoff{Base: -time.Second, Max: time.Hour, Jitter: -1}, 1, 2 * worklease.DefaultBackoffBase},
		{"negative cap means default", worklease.Backoff{Base: time.Second, Max: -time.Second, Jitter: -1}, 20, worklease.DefaultBackoffMax},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tt.want, tt.b.Delay(tt.attempts))
		})
	}
}

func TestBackoffDefaults(t *testing.T) {
	t.Parallel()
	require.Equal(t, 100*time.Millisecond, worklease.DefaultBackoffBase)
	require.Equal(t, time.Minute, worklease.DefaultBackoffMax)
	require.InDelta(t, 0.1, worklease.DefaultBackoffJitter, 0)

	// The zero Backoff is ready to use, with the default 10% jitter.
	var zero worklease.Backoff
	for attempts := range 20 {
		d := min(worklease.DefaultBackoffBase<<attempts, worklease.DefaultBackoffMax)
		for range 50 {
			got := zero.Delay(attempts)
			require.GreaterOrEqual(t, got, d, "attempts %d", attempts)
			require.LessOrEqual(t, got, d+d/10, "attempts %d", attempts)
		}
	}
}

// With jitter, the delay is within [d, d*(1+Jitter)], and it varies.
func TestBackoffJitter(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		b        worklease.Backoff
		attempts int
		d        time.Duration // the delay before jitter
	}{
		{"a tenth", worklease.Backoff{Base: time.Second, Max: time.Hour, Jitter: 0.1}, 4, 16 * time.Second},
		{"at the cap", worklease.Backoff{Base: time.Second, Max: time.Minute, Jitter: 0.1}, 10, time.Minute},
		{"a larger fraction", worklease.Backoff{Base: time.Second, Max: time.Hour, Jitter: 0.5}, 2, 4 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			limit := tt.d + time.Duration(tt.b.Jitter*float64(tt.d))
			seen := map[time.Duration]bool{}
			for range 1000 {
				got := tt.b.Delay(tt.attempts)
				require.GreaterOrEqual(t, got, tt.d)
				require.LessOrEqual(t, got, limit)
				seen[got] = true
			}
			require.Greater(t, len(seen), 1, "the jitter is random")
		})
	}
}

// Jitter on a delay near the largest Duration must not overflow into a
// negative wait: a Max of math.MaxInt64 is a natural way to say "no cap".
func TestBackoffJitterDoesNotOverflow(t *testing.T) {
	t.Parallel()
	b := worklease.Backoff{Base: time.Second, Max: time.Duration(math.MaxInt64)} // default 10% jitter
	tests := []struct {
		attempts int
		d        time.Duration // the delay before jitter
	}{
		{33, time.Second << 33},
		{34, time.Duration(math.MaxInt64)}, // capped from here on
		{63, time.Duration(math.MaxInt64)},
		{1000, time.Duration(math.MaxInt64)},
	}
	for _, tt := range tests {
		for range 100 {
			got := b.Delay(tt.attempts)
			require.GreaterOrEqual(t, got, tt.d, "attempts %d", tt.attempts)
		}
	}
}
