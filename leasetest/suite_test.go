package leasetest_test

import (
	"sync"
	"testing"
	"time"

	"github.com/worklease/worklease"
	"github.com/worklease/worklease/leasetest"
)

// TestManager runs the suite against the in-memory Manager with nothing
// but the exported API, as another backend's test does. The root package
// runs it too, with journals and the Manager's own checks.
func TestManager(t *testing.T) {
	leasetest.Run(t, leasetest.Suite{
		New: func(t *testing.T, opts ...worklease.Option) worklease.Backend {
			m, err := worklease.New(opts...)
			if err != nil {
				t.Fatal(err)
			}
			return m.Backend()
		},
		Events: true,
	})
}

func TestClock(t *testing.T) {
	t.Parallel()
	start := time.Unix(1_700_000_000, 0)
	c := leasetest.NewClock(start)
	if got := c.Now(); !got.Equal(start) {
		t.Fatalf("Now() = %v, want %v", got, start)
	}
	if got := c.Advance(time.Minute); !got.Equal(start.Add(time.Minute)) {
		t.Fatalf("Advance(1m) = %v", got)
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				c.Advance(time.Millisecond)
				c.Now()
			}
		})
	}
	wg.Wait()
	if got, want := c.Now(), start.Add(time.Minute+800*time.Millisecond); !got.Equal(want) {
		t.Fatalf("after concurrent advances: %v, want %v", got, want)
	}
	var zero leasetest.Clock
	if !zero.Now().IsZero() {
		t.Fatal("the zero Clock does not read as the zero time")
	}
}
