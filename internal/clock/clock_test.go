package clock_test

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/worklease/worklease/internal/clock"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestFake(t *testing.T) {
	t.Parallel()
	start := time.Unix(1_700_000_000, 0)
	f := clock.NewFake(start)
	require.Equal(t, start, f.Now())
	require.Equal(t, start.Add(time.Minute), f.Advance(time.Minute))
	require.Equal(t, start.Add(time.Minute), f.Now())
	f.Set(start)
	require.Equal(t, start, f.Now())
	require.Equal(t, start.Add(-time.Second), f.Advance(-time.Second))

	var zero clock.Fake
	require.True(t, zero.Now().IsZero())
}

func TestFakeConcurrent(t *testing.T) {
	t.Parallel()
	f := clock.NewFake(time.Unix(0, 0))
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				f.Advance(time.Millisecond)
				_ = f.Now()
			}
		})
	}
	wg.Wait()
	require.Equal(t, time.Unix(0, 0).Add(800*time.Millisecond), f.Now())
}
