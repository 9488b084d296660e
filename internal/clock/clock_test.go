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

func TestFakeTimers(t *testing.T) {
	t.Parallel()
	f := clock.NewFake(time.Unix(0, 0))
	fired := make(chan string, 4)
	a := f.AfterFunc(time.Second, func() { fired <- "a" })
	b := f.AfterFunc(2*time.Second, func() { fired <- "b" })
	c := f.AfterFunc(3*time.Second, func() { fired <- "c" })
	require.Equal(t, 3, f.Timers())
	require.True(t, c.Stop())
	require.False(t, c.Stop(), "stopped already")
	f.Advance(999 * time.Millisecond)
	require.Equal(t, 2, f.Timers(), "nothing is due yet")
	f.Advance(time.Millisecond)
	require.Equal(t, "a", <-fired)
	require.False(t, a.Stop(), "fired already")
	require.True(t, b.Reset(time.Second), "b was pending")
	f.Advance(time.Second)
	require.Equal(t, "b", <-fired)
	require.False(t, a.Reset(time.Minute), "a had fired")
	require.Equal(t, 1, f.Timers())
	f.Set(time.Unix(62, 0)) // a minute after a was reset
	require.Equal(t, "a", <-fired)
	require.Equal(t, 0, f.Timers())
	f.Advance(time.Hour)
	select {
	case name := <-fired:
		t.Fatalf("%s fired after it was stopped", name)
	default:
	}
}

func TestFakeWaitTimers(t *testing.T) {
	t.Parallel()
	f := clock.NewFake(time.Unix(0, 0))
	done := make(chan struct{})
	waited := make(chan bool)
	go func() { waited <- f.WaitTimers(1, done) }()
	f.AfterFunc(time.Second, func() {})
	require.True(t, <-waited)
	go func() { waited <- f.WaitTimers(5, done) }()
	close(done)
	require.False(t, <-waited)
}
