package workleasekafka_test

import (
	"testing"

	"go.uber.org/goleak"
)

// The clusters, clients, Pools and Consumers all stop before a test ends:
// goleak finds none of their goroutines.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
