package worker

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/worklease/worklease"
)

// minRenewTTL is the least a renewal extends a lease by: a claim that
// reads as expiring sooner (clocks apart, or a worker late to start it)
// is renewed as one of this TTL.
const minRenewTTL = 100 * time.Millisecond

// A renewer keeps the leases of a Pool's running handlers, if leases
// expire: it extends each at about a third of its TTL, jittered, by the
// TTL, which it reads as the time from the claim to its expiry, by the
// Pool's clock. One timer serves every lease, and each renewal extends
// every lease due within a sixth of its TTL with one ExtendMany, so that
// renewals cost the backend one call for many handlers. If an extension
// finds a lease gone, the renewer cancels its handler's context with a
// cause matching ErrLeaseLost, and tells EventLeaseLost.
//
// Its timer calls renew in a goroutine of its own; stop and close wait for
// a renewal under way, so that none outlives its job or the Pool.
type renewer struct {
	p *Pool

	mu      sync.Mutex // guards everything below
	timer   timer      // nil until the first lease that needs it
	armed   bool       // timer is set and its renew has not started
	at      time.Time  // when it fires, if armed
	leases  map[*worker]*renewal
	calling bool          // a renewal's ExtendMany is under way
	called  chan struct{} // closed when it ends; nil if none is
	closed  bool
	fired   chan struct{} // closed by a renew close waits for; nil otherwise
}

// A renewal is one running handler's lease, as the renewer keeps it.
type renewal struct {
	c      worklease.Claim
	ttl    time.Duration
	next   time.Time // when to extend it next
	cancel context.CancelCauseFunc
	inCall bool // in the ExtendMany under way
	lost   bool // found gone
}

// start keeps c's lease, the one w's handler runs under, until stop,
// cancelling the handler's context with cancel if it is lost.
func (r *renewer) start(w *worker, c worklease.Claim, cancel context.CancelCauseFunc) {
	now := r.p.cfg.clock.Now()
	left := c.ExpiresAt.Sub(now)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.leases == nil {
		r.leases = make(map[*worker]*renewal)
	}
	// The first renewal comes at a third of the time the lease has left,
	// however short: a lease of less than minRenewTTL is extended by that.
	e := &renewal{c: c, ttl: max(left, minRenewTTL), next: now.Add(jitterThird(max(left, 0))), cancel: cancel}
	r.leases[w] = e
	if !r.armed || e.next.Before(r.at) {
		r.armLocked(now, e.next)
	}
}

// jitterThird returns about a third of period, give or take a tenth.
func jitterThird(period time.Duration) time.Duration {
	return time.Duration(float64(period) / 3 * (0.9 + 0.2*rand.Float64()))
}

// armLocked sets the timer to fire at at. r.mu must be held.
func (r *renewer) armLocked(now, at time.Time) {
	d := at.Sub(now)
	if r.timer == nil {
		r.timer = r.p.cfg.clock.AfterFunc(d, r.renew)
	} else {
		r.timer.Reset(d)
	}
	r.armed, r.at = true, at
}

// rearmLocked sets the timer for the earliest lease's next renewal, or
// stops it if none is kept. r.mu must be held.
func (r *renewer) rearmLocked() {
	var first time.Time
	for _, e := range r.leases {
		if !e.lost && (first.IsZero() || e.next.Before(first)) {
			first = e.next
		}
	}
	switch {
	case !first.IsZero():
		r.armLocked(r.p.cfg.clock.Now(), first)
	case r.armed && r.timer.Stop():
		r.armed = false
	}
}

// renew extends the leases due, and arms the timer for the next renewal.
func (r *renewer) renew() {
	r.mu.Lock()
	r.armed = false
	if r.fired != nil {
		close(r.fired)
		r.fired = nil
	}
	if r.closed || r.calling {
		r.mu.Unlock() // a renewal under way arms the timer when it ends
		return
	}
	now := r.p.cfg.clock.Now()
	var due []*renewal
	var claims []worklease.Claim
	var by time.Duration
	for _, e := range r.leases {
		// Leases due within a sixth of their TTL go with this one.
		if !e.lost && e.next.Sub(now) <= e.ttl/6 {
			e.inCall = true
			due = append(due, e)
			claims = append(claims, e.c)
			by = max(by, e.ttl)
		}
	}
	if len(due) == 0 {
		r.rearmLocked()
		r.mu.Unlock()
		return
	}
	r.calling, r.called = true, make(chan struct{})
	r.mu.Unlock()

	_, errs, err := r.p.b.ExtendMany(r.p.base, claims, by)
	if err == nil && len(errs) != len(claims) {
		err = fmt.Errorf("the backend answered %d of %d", len(errs), len(claims))
	}

	r.mu.Lock()
	now = r.p.cfg.clock.Now()
	var lost []*renewal
	var lostErrs []error
	for i, e := range due {
		e.inCall = false
		if err == nil && errs[i] != nil && leaseGone(errs[i]) {
			e.lost = true
			lost, lostErrs = append(lost, e), append(lostErrs, errs[i])
			continue
		}
		// After an error that is no answer about the lease (a lost
		// connection, say) the next try comes as soon as another renewal
		// would.
		e.next = now.Add(jitterThird(e.ttl))
	}
	r.calling = false
	close(r.called)
	r.called = nil
	if !r.closed {
		r.rearmLocked()
	}
	r.mu.Unlock()

	for i, e := range lost {
		e.cancel(&leaseLostError{lostErrs[i]})
		r.p.leaseLost(e.c, lostErrs[i])
	}
	switch {
	case err != nil:
		r.p.callFailed(fmt.Errorf("worker: ExtendMany of %d leases: %w", len(claims), err))
	default:
		for i, e := range errs {
			if e != nil && !leaseGone(e) {
				r.p.callFailed(fmt.Errorf("worker: renewal of %s/%d: %w", claims[i].Domain, claims[i].Offset, e))
			}
		}
	}
}

// stop ends the keeping of w's lease, once a renewal under way that
// extends it has returned, and reports whether a renewal found the lease
// gone.
func (r *renewer) stop(w *worker) (lost bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for {
		e := r.leases[w]
		if e == nil {
			return false
		}
		if !e.inCall {
			delete(r.leases, w)
			if len(r.leases) == 0 && r.armed && r.timer.Stop() {
				r.armed = false
			}
			return e.lost
		}
		called := r.called
		r.mu.Unlock()
		<-called
		r.mu.Lock()
	}
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
	called := r.called
	r.mu.Unlock()
	if fired != nil {
		<-fired
	}
	if called != nil {
		<-called
	}
}

// leaseGone reports whether err, from a call with a lease's token, says
// the lease is gone.
func leaseGone(err error) bool {
	return errors.Is(err, worklease.ErrLeaseExpired) || errors.Is(err, worklease.ErrLeaseRevoked) ||
		errors.Is(err, worklease.ErrTokenMismatch) || errors.Is(err, worklease.ErrNoLease)
}
