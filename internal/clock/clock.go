// Package clock provides a fake clock that tests set and advance by hand
// and pass to worklease.WithClock. (Without it a Manager reads the system
// clock itself.) Its timers let code that waits, such as a worker pool's
// lease renewals, run on the same fake time.
package clock

import (
	"slices"
	"sync"
	"time"
)

// Fake is a clock that moves only when told to. It is safe for concurrent use.
// The zero Fake reads as the zero time.
type Fake struct {
	mu      sync.Mutex // guards now, timers and changed
	now     time.Time
	timers  []*Timer      // pending, in no particular order
	changed chan struct{} // closed and replaced when timers changes; nil until a waiter needs it
}

// NewFake returns a Fake clock set to t.
func NewFake(t time.Time) *Fake { return &Fake{now: t} }

// Now returns the fake clock's current time.
func (f *Fake) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

// Set moves the clock to t, which may be earlier than its current time,
// and fires the timers due by then.
func (f *Fake) Set(t time.Time) {
	f.mu.Lock()
	f.now = t
	f.fireLocked()
	f.mu.Unlock()
}

// Advance moves the clock forward by d (backward if d is negative), fires
// the timers due by then, and returns the new time.
func (f *Fake) Advance(d time.Duration) time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.now = f.now.Add(d)
	f.fireLocked()
	return f.now
}

// A Timer is a Fake clock's time.AfterFunc: it calls its function in a
// goroutine of its own once the clock reaches its time.
type Timer struct {
	f  *Fake
	at time.Time // guarded by f.mu
	fn func()
}

// AfterFunc returns a Timer that calls fn in its own goroutine once the
// clock has moved d or more past now, as time.AfterFunc does in real time.
// A d of zero or less is due at once: it fires at the clock's next move.
func (f *Fake) AfterFunc(d time.Duration, fn func()) *Timer {
	t := &Timer{f: f, fn: fn}
	f.mu.Lock()
	defer f.mu.Unlock()
	t.at = f.now.Add(d)
	f.addLocked(t)
	return t
}

// Stop prevents the timer from firing. It reports whether it did: false
// if the timer fired or was stopped already.
func (t *Timer) Stop() bool {
	t.f.mu.Lock()
	defer t.f.mu.Unlock()
	return t.f.removeLocked(t)
}

// Reset makes the timer fire d from the clock's now, whether it was
// pending, stopped or fired, and reports whether it was pending.
func (t *Timer) Reset(d time.Duration) bool {
	t.f.mu.Lock()
	defer t.f.mu.Unlock()
	pending := t.f.removeLocked(t)
	t.at = t.f.now.Add(d)
	t.f.addLocked(t)
	return pending
}

// Timers returns how many timers are pending: made or reset, and neither
// fired nor stopped.
func (f *Fake) Timers() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.timers)
}

// WaitTimers blocks until n timers are pending, or done is closed. It
// lets a test move the clock only once the code under test waits on it.
func (f *Fake) WaitTimers(n int, done <-chan struct{}) bool {
	for {
		f.mu.Lock()
		if len(f.timers) == n {
			f.mu.Unlock()
			return true
		}
		if f.changed == nil {
			f.changed = make(chan struct{})
		}
		ch := f.changed
		f.mu.Unlock()
		select {
		case <-ch:
		case <-done:
			return false
		}
	}
}

func (f *Fake) addLocked(t *Timer) {
	f.timers = append(f.timers, t)
	f.notifyLocked()
}

func (f *Fake) removeLocked(t *Timer) bool {
	i := slices.Index(f.timers, t)
	if i < 0 {
		return false
	}
	f.timers = slices.Delete(f.timers, i, i+1)
	f.notifyLocked()
	return true
}

// fireLocked starts the functions of the timers due at now, the earliest
// first, each in its own goroutine.
func (f *Fake) fireLocked() {
	var due []*Timer
	f.timers = slices.DeleteFunc(f.timers, func(t *Timer) bool {
		if t.at.After(f.now) {
			return false
		}
		due = append(due, t)
		return true
	})
	if len(due) == 0 {
		return
	}
	slices.SortStableFunc(due, func(a, b *Timer) int { return a.at.Compare(b.at) })
	for _, t := range due {
		go t.fn()
	}
	f.notifyLocked()
}

func (f *Fake) notifyLocked() {
	if f.changed != nil {
		close(f.changed)
		f.changed = nil
	}
}
