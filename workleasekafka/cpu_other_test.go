//go:build !unix

package workleasekafka_test

import "time"

// processCPU reports that the platform does not tell the process's CPU
// time here.
func processCPU() (time.Duration, bool) { return 0, false }
