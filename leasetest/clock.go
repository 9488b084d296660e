package leasetest

import (
	"sync"
	"time"
)

// Clock is a fake clock that moves only when told to. The suite passes one
// to every backend it makes, with [worklease.WithClock], and advances it to
// make leases expire. It is safe for concurrent use. The zero Clock reads as
// the zero time; use [NewClock].
type Clock struct {
	mu  sync.Mutex // guards now
	now time.Time
}

// NewClock returns a Clock set to t.
func NewClock(t time.Time) *Clock { return &Clock{now: t} }

// Now returns the clock's current time. It implements [worklease.Clock].
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d (backward if d is negative) and
// returns the new time.
func (c *Clock) Advance(d time.Duration) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	return c.now
}
