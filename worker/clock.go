package worker

import "time"

// clock is where a Pool reads the time and waits: the system's, and a
// fake one in tests (see export_test.go), which moves with a Manager's
// fake clock.
type clock interface {
	Now() time.Time
	AfterFunc(d time.Duration, f func()) timer
}

// timer is a *time.Timer that AfterFunc made, or a fake one.
type timer interface {
	Stop() bool
	Reset(d time.Duration) bool
}

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

func (systemClock) AfterFunc(d time.Duration, f func()) timer { return time.AfterFunc(d, f) }
