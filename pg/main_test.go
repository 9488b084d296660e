package pg_test

import (
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	// pgxpool's health checks run in a goroutine of each pool; every test
	// closes its pool, and goleak waits for the goroutine to end.
	goleak.VerifyTestMain(m)
}
