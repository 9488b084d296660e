package leasetest_test

import (
	"testing"

	"github.com/worklease/worklease"
	"github.com/worklease/worklease/leasetest"
)

// A backend's test calls Run with a constructor, and says what else the
// backend can do: here, the in-memory Manager, which reports events. A
// backend with durable state sets Reopen as well, to have restarts checked.
func Example() {
	// In a backend's package, inside func TestBackend(t *testing.T):
	var t *testing.T
	leasetest.Run(t, leasetest.Suite{
		New: func(t *testing.T, opts ...worklease.Option) worklease.Backend {
			// A backend reads the suite's options with worklease.NewConfig;
			// the suite always passes WithClock with its own Clock.
			m, err := worklease.New(opts...)
			if err != nil {
				t.Fatal(err)
			}
			return m.Backend()
		},
		Events: true,
	})
}
