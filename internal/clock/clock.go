// Package clock provides a fake clock that tests set and advance by hand
// and pass to worklease.WithClock. (Without it a Manager reads the system
// clock itself.)
package clock

import (
	"sync"
	"time"
)

// Fake is a clock that moves only when told to. It is safe for concurrent use.
// The zero Fake reads as the zero time.
type Fake struct {
	mu  sync.Mutex // guards now
	now time.Time
}

// NewFake returns a Fake clock set to t.
func NewFake(t time.Time) *Fake { return &Fake{now: t} }

// Now returns the fake clock's current time.
func (f *Fake) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

// Set moves the clock to t, which may be earlier than its current time.
func (f *Fake) Set(t time.Time) {
	f.mu.Lock()
	f.now = t
	f.mu.Unlock()
}

// Advance moves the clock forward by d (backward if d is negative) and
// returns the new time.
func (f *Fake) Advance(d time.Duration) time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.now = f.now.Add(d)
	return f.now
}
