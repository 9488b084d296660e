package worker

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/worklease/worklease"
)

// minRenewTTL is the least a renewal extends a lease by: a claim that
// reads as expiring sooner (clocks apart, or a worker late to start it)
// is renewed as one of this TTL.
const minRenewTTL = 100 * time.Millisecond

// A renewer keeps the lease of its worker's job while the handler runs, if
// the lease expires: it extends it at about a third of its TTL, jittered,
// by the TTL, which it reads as the time from the claim to its expiry, by
// the Pool's clock. If an extension finds the lease gone, it cancels the
// handler's context with a cause matching ErrLeaseLost, and tells
// EventLeaseLost.
//
// Its timer calls renew in a goroutine of its own; stop and close wait for
// a renewal under way, so that none outlives the job or the Pool.
type renewer struct {
	p *Pool

	mu     sync.Mutex // guards everything below
	timer  timer      // nil until the first job that needs it
	armed  bool       // timer is set and its renew has not started
	active bool       // a job's lease is being kept
	c      worklease.Claim
	ttl    time.Duration
	cancel context.CancelCauseFunc
	lost   bool // the job's lease was found gone
	closed bool
	fired  chan struct{} // closed by a renew close waits for; nil otherwise
	calls  sync.WaitGroup
}

// start keeps c's lease until stop, cancelling the handler's context with
// cancel if it is lost.
func (r *renewer) start(c worklease.Claim, cancel context.CancelCauseFunc) {
	left := c.ExpiresAt.Sub(r.p.cfg.clock.Now())
	r.mu.Lock()
	defer r.mu.Unlock()
	r.c, r.ttl, r.cancel, r.active, r.lost = c, max(left, minRenewTTL), cancel, true, false
	// The first renewal comes at a third of the time the lease has left,
	// however short: a lease of less than minRenewTTL is extended by that.
	r.armLocked(max(left, 0))
}

// armLocked sets the timer for the next renewal, at about a third of
// period. r.mu must be held.
func (r *renewer) armLocked(period time.Duration) {
	d := time.Duration(float64(period) / 3 * (0.9 + 0.2*rand.Float64()))
	if r.timer == nil {
		r.timer = r.p.cfg.clock.AfterFunc(d, r.renew)
	} else {
		r.timer.Reset(d)
	}
	r.armed = true
}

// renew extends the lease, and arms the timer for the next renewal.
func (r *renewer) renew() {
	r.mu.Lock()
	r.armed = false
	if r.fired != nil {
		close(r.fired)
		r.fired = nil
	}
	if !r.active || r.closed {
		r.mu.Unlock()
		return
	}
	c, ttl, cancel := r.c, r.ttl, r.cancel
	r.calls.Add(1)
	r.mu.Unlock()
	defer r.calls.Done()

	_, err := r.p.b.Extend(r.p.base, c.Domain, c.Token, ttl)
	r.mu.Lock()
	if !r.active || r.c.Token != c.Token {
		r.mu.Unlock() // the job ended meanwhile: its end says what became of the lease
		return
	}
	lost := err != nil && leaseGone(err)
	if lost {
		r.lost = true
	} else {
		// After an error that is no answer about the lease (a lost
		// connection, say) the next try comes as soon as another renewal
		// would.
		r.armLocked(r.ttl)
	}
	r.mu.Unlock()
	switch {
	case lost:
		cancel(&leaseLostError{err})
		r.p.leaseLost(c, err)
	case err != nil:
		r.p.callFailed(err)
	}
}

// stop ends the keeping of the job's lease, once a renewal under way has
// returned, and reports whether a renewal found the lease gone.
func (r *renewer) stop() (lost bool) {
	r.mu.Lock()
	r.active = false
	if r.armed && r.timer.Stop() {
		r.armed = false
	}
	r.mu.Unlock()
	r.calls.Wait()
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lost
}

// close stops the timer for good, waiting for a renew it already started.
func (r *renewer) close() {
	r.mu.Lock()
	r.closed = true
	var fired chan struct{}
	if r.armed {
		if r.timer.Stop() {
			r.armed = false
		} else { // its renew is on its way: wait for it
			fired = make(chan struct{})
			r.fired = fired
		}
	}
	r.mu.Unlock()
	if fired != nil {
		<-fired
	}
	r.calls.Wait()
}

// leaseGone reports whether err, from a call with a lease's token, says
// the lease is gone.
func leaseGone(err error) bool {
	return errors.Is(err, worklease.ErrLeaseExpired) || errors.Is(err, worklease.ErrLeaseRevoked) ||
		errors.Is(err, worklease.ErrTokenMismatch) || errors.Is(err, worklease.ErrNoLease)
}
