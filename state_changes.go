package worklease

import (
	"errors"
	"fmt"
)

// A change is one transition of a domain's state, as the state machine
// makes and journals it: a call appends its changes to a buffer its caller
// owns, applying each as it goes, and the caller counts, journals and
// reports them. Replay applies journaled changes with the same appliers, so
// a record means one thing live and after a restart.
//
// Which fields a kind fills is the journal's format (see Record): every
// change has its kind and offset (-1 for none); the others as the calls in
// state_calls.go set them. A change's time is its call's (see step).
type change struct {
	kind   EventKind
	front  bool // EventEnqueued: queued at the front (LIFO)
	offset int64
	// attempt is the attempt number a grant, completion, expiry or kill
	// concerns, the attempts made for a requeue, or the retry count for a
	// retry (see the EventKind constants).
	attempt int
	retries int   // failed attempts: a grant's, retry's, extension's or requeue's
	token   Token // the lease's, when the change concerns one
	// acquiredAt and expiresAt are the lease's after a grant, retry or
	// extension; a requeue's acquiredAt is its offset's first grant.
	acquiredAt instant
	expiresAt  instant
	cause      error
	// notBefore: for EventEnqueued, the time before which the offset may
	// not be granted (a schedule); for EventRequeued of a Retry, when its
	// delay ends. Zero: none.
	notBefore instant
	// put: for EventEnqueued, the payload and key the offset is stored
	// with; nil for neither.
	put *enqueueData
}

// apply changes s as c, made at now, says. It checks nothing: live calls
// make only changes that fit, and replay checks each journaled one with
// fits first.
func (s *domainState) apply(p *policy, now instant, c *change) {
	switch c.kind {
	case EventEnqueued:
		s.applyEnqueued(c.offset, c.front)
		if c.put != nil || c.notBefore != 0 {
			s.applyStored(p, now, c)
		}
	case EventAcquired:
		s.applyAcquired(p, lease{offset: c.offset, acquiredAt: c.acquiredAt, expiresAt: c.expiresAt, retries: c.retries}, c.token, c.attempt)
	case EventProcessed:
		s.applyProcessed(p, c.offset)
	case EventRetrying:
		s.applyRetrying(c.retries, c.expiresAt)
	case EventExtended:
		s.lease.expiresAt = c.expiresAt
	case EventExpired:
		s.revoke(c.token, ErrLeaseExpired)
	case EventReleased:
		s.revoke(c.token, ErrLeaseRevoked)
	case EventKilled:
		if !c.token.IsZero() { // a kill in flight
			s.revoke(c.token, ErrLeaseRevoked)
		}
	case EventRequeued:
		s.applyRequeued(c)
	case EventDeadLettered:
		s.applyDeadLettered(p, now, c)
	case EventRedriven:
		s.removeFailed(c.offset)
		s.queue().pushFront(c.offset)
		s.endRetryDelay() // the backlog has another head
	case EventPaused:
		s.paused = true
		s.endRetryDelay()
	case EventResumed:
		s.paused = false
		s.endRetryDelay()
	case EventCancelled:
		s.applyCancelled(p, c)
	}
	// EventRejected and EventOutOfOrder change nothing: the first refuses a
	// call, the second precedes the grant that changes the state.
}

// The appliers of the changes the hot path makes take their fields, not a
// change: a call builds the change only if its caller keeps it (see
// step.note).

// applyEnqueued queues offset, at the front if front is set, and reports
// whether it was added: a live call asks for a duplicate too, and makes no
// change of it.
func (s *domainState) applyEnqueued(offset int64, front bool) bool {
	if front {
		return s.queue().pushFront(offset)
	}
	return s.queue().pushBack(offset)
}

// applyStored keeps what c, an Enqueued change made at now, stores with
// its offset besides the offset: a payload, Append's key, a schedule.
func (s *domainState) applyStored(p *policy, now instant, c *change) {
	if c.notBefore != 0 {
		s.schedule(c.offset, c.notBefore)
	}
	if c.put == nil {
		return
	}
	if c.put.payload != nil {
		s.keepPayload(c.offset, c.put.payload)
	}
	if c.put.key != "" {
		s.keepKey(p, c.put.key, appendKey{offset: c.offset, sum: c.put.sum, at: now})
	}
}

// applyAcquired makes l, granted under tok on its attempts-th attempt, the
// current lease: its offset leaves the backlog and its carried attempts,
// and tok's fence becomes the latest.
func (s *domainState) applyAcquired(p *policy, l lease, tok Token, attempts int) {
	// Most grants are of an offset never queued, by this Manager.
	if s.backlog != nil || s.cold != nil || tok.serial != s.issued.serial || tok.instance != p.instance {
		s.grantRare(p, l.offset, tok)
	}
	s.issued.fence = tok.fence
	s.leased, s.lease, s.chained = true, l, false
	// The attempts made beyond the failed ones were released (see attempts).
	s.released = uint32(attempts - l.retries - 1)
}

// grantRare does for a grant of offset under tok what only some need: the
// offset leaves the backlog and drops the attempts it carried, and a lease
// another Manager granted, which replay restores, keeps its own token (the
// latest grant's is made of this Manager's instance and the domain's
// serial).
func (s *domainState) grantRare(p *policy, offset int64, tok Token) {
	s.unqueue(offset)
	if s.cold != nil {
		s.endRetryDelay() // the domain is no longer ready: its delay ends
	}
	if tok.serial != s.issued.serial || tok.instance != p.instance {
		s.coldPart().leaseToken = tok
	}
}

// unqueue takes offset out of the backlog and drops the attempts it
// carried, if any.
func (s *domainState) unqueue(offset int64) {
	if head, ok := s.backlog.front(); ok { // else the offset is not queued
		if head == offset {
			s.backlog.popFront() // the usual case, and O(1)
		} else {
			s.backlog.remove(offset)
		}
	}
	if s.cold != nil {
		s.dropCarried(offset)
		s.dropScheduled(offset)
	}
}

// setAcquired makes c, a zero change, the change that applyAcquired
// applies. It sets the fields one by one: a change built apart and copied
// in is read back right after the stores that built it, which the
// processor cannot forward to the copy's wider loads (see stepBuffer), and
// the copy of its pointers takes write barriers. Every grant comes here.
func (c *change) setAcquired(l lease, tok Token, attempts int) {
	c.kind, c.offset, c.attempt, c.token = EventAcquired, l.offset, attempts, tok
	c.retries, c.acquiredAt, c.expiresAt = l.retries, l.acquiredAt, l.expiresAt
}

// applyProcessed makes the lease's offset processed, and ends the lease.
// The offset's payload, if it has one, goes with it.
func (s *domainState) applyProcessed(p *policy, offset int64) {
	// markTerminal and release, written out: every cycle comes here.
	if p.monotonic {
		s.processed.raiseTo(offset)
	} else {
		s.processed.add(offset)
	}
	s.leased, s.lease, s.released = false, lease{}, 0
	if s.cold != nil {
		s.releaseCold()
		s.dropPayload(offset)
	}
}

// applyRetrying counts a failed attempt of the lease's offset, whose failed
// attempts are now retries and whose next attempt expires at expiresAt.
func (s *domainState) applyRetrying(retries int, expiresAt instant) {
	s.lease.retries, s.lease.expiresAt = retries, expiresAt
}

// applyRequeued puts c's offset back at the front of the line, carrying
// its attempts to its next grant. An offset in flight is one Retry gives
// back: its lease ends with it, its holder's token spent without being
// revoked (as after Succeed).
func (s *domainState) applyRequeued(c *change) {
	if s.leased && s.lease.offset == c.offset {
		s.release()
	}
	s.queue().pushFront(c.offset)
	s.carry(c.offset, attempt{attempts: c.attempt, retries: c.retries, acquiredAt: c.acquiredAt})
	if c.notBefore != 0 {
		s.cold.retryAt = c.notBefore // carry made the cold part
	}
}

// applyDeadLettered makes c's offset failed: it leaves the lease, if it is
// in flight, or the backlog.
func (s *domainState) applyDeadLettered(p *policy, at instant, c *change) {
	if s.leased && s.lease.offset == c.offset {
		s.release()
	}
	s.leaveBacklog(c.offset)
	s.coldPart().failed.add(c.offset, deadLetter{cause: deadLetterCause(c.cause), attempts: c.attempt, at: at})
	s.markTerminal(p, c.offset, false)
}

// leaveBacklog takes offset out of the backlog, as unqueue does, and ends
// the retry delay if offset was the head: the delay was the head's.
func (s *domainState) leaveBacklog(offset int64) {
	if head, ok := s.backlog.front(); ok && head == offset {
		s.endRetryDelay()
	}
	s.unqueue(offset)
}

// applyCancelled makes c's offset cancelled: it leaves the lease, revoked,
// if it is in flight, or the backlog, and counts as processed from now on;
// its payload goes.
func (s *domainState) applyCancelled(p *policy, c *change) {
	if !c.token.IsZero() { // a cancel in flight
		s.revoke(c.token, ErrLeaseRevoked)
	}
	s.leaveBacklog(c.offset)
	s.markTerminal(p, c.offset, true)
	s.dropPayload(c.offset)
}

// fits reports why c, read from a journal with the time now, cannot follow
// s under p, or nil if it can. ended is the offset of the lease the domain's previous record
// ended without its holder (see replayState.ended), or -1: it is not
// terminal, whatever isProcessed says of it, until c puts it back in the
// backlog or fails it.
func (s *domainState) fits(p *policy, now instant, c *change, ended int64) error {
	off := c.offset
	if off < 0 && c.kind != EventPaused && c.kind != EventResumed {
		return errors.New("negative offset")
	}
	terminal := s.isFailed(off) || off != ended && s.isProcessed(p, off)
	holds := s.leased && s.leaseToken(p) == c.token && s.lease.offset == off
	queuedOrLeased := (s.leased && s.lease.offset == off) || s.backlog.contains(off)
	switch c.kind {
	case EventEnqueued:
		if terminal || queuedOrLeased {
			return errors.New("enqueues an offset that is terminal, leased or queued")
		}
	case EventAcquired:
		if s.leased || terminal {
			return errors.New("grants a lease while one is held, or on a terminal offset")
		}
		if c.token.fence <= s.issued.fence || c.token.IsZero() {
			return fmt.Errorf("grants fence %d after fence %d", c.token.fence, s.issued.fence)
		}
		if c.attempt <= c.retries {
			return fmt.Errorf("grants attempt %d after %d failed", c.attempt, c.retries)
		}
	case EventProcessed:
		if !holds {
			return errors.New("completes a lease that is not held")
		}
	case EventRetrying:
		if !holds || c.retries != s.lease.retries+1 {
			return errors.New("retries a lease that is not held, or skips a retry")
		}
	case EventExtended:
		if !holds || c.expiresAt <= s.lease.expiresAt {
			return errors.New("extends a lease that is not held, or not later")
		}
	case EventExpired:
		if !holds || s.lease.expiresAt == 0 || now < s.lease.expiresAt {
			return errors.New("expires a lease that is not held, or not yet due")
		}
	case EventReleased:
		if !holds {
			return errors.New("releases a lease that is not held")
		}
	case EventKilled:
		if terminal {
			return errors.New("kills a terminal offset")
		}
		if !c.token.IsZero() && !holds {
			return errors.New("kills a lease that is not held")
		}
	case EventRequeued:
		// The offset in flight goes back only from Retry, whose Retrying
		// record counted the failed attempt just before.
		retried := s.leased && s.lease.offset == off
		if terminal || queuedOrLeased && !retried {
			return errors.New("requeues an offset that is terminal, leased or queued")
		}
		if retried && (c.retries != s.lease.retries || c.attempt != s.attempts()-1) {
			return errors.New("requeues the offset in flight without the retry that failed it")
		}
		// Journals written before a forced release's Attempt counted its
		// last attempt hold Attempt == Retries: that undercount stays.
		if c.attempt < c.retries {
			return errors.New("requeues an offset with more failed attempts than attempts")
		}
	case EventDeadLettered:
		if terminal {
			return errors.New("dead-letters a terminal offset")
		}
		if s.leased && s.lease.offset == off && s.leaseToken(p) != c.token {
			return errors.New("dead-letters a lease under another token")
		}
	case EventRedriven:
		if !s.isFailed(off) {
			return errors.New("redrives an offset that is not failed")
		}
	case EventCancelled:
		if terminal {
			return errors.New("cancels a terminal offset")
		}
		if c.token.IsZero() && !s.backlog.contains(off) || !c.token.IsZero() && !holds {
			return errors.New("cancels an offset that is neither queued nor the lease's")
		}
	case EventPaused, EventResumed:
	default:
		return fmt.Errorf("a %v record changes no state and is never journaled", c.kind)
	}
	return nil
}

// journaled reports whether c changes state, and so is journaled.
func (c *change) journaled() bool { return c.kind != EventRejected && c.kind != EventOutOfOrder }
