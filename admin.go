package worklease

import (
	"cmp"
	"slices"
	"strings"
)

// The admin calls repair and inspect domains: list the leases in flight and
// the dead letters, redrive a dead letter, kill an offset, take a stuck lease
// back, pause and resume a domain, forget one. Redrive, Kill and Forget are
// deliberate exceptions to idempotence; each says how.

// Inspect returns a copy of domain's state. A domain the Manager has never
// seen is reported idle and empty. Like every call, it first revokes the
// domain's lease if it has expired.
func (m *Manager) Inspect(domain string) (DomainInfo, error) {
	sh, r, now, err := m.enter(&callInspect, domain, 0)
	if r == nil {
		return DomainInfo{}, err
	}
	st := step{now: now, kept: m.stepBuffer()}
	s := &r.state
	s.expireIfDue(&m.policy, &st)
	info := DomainInfo{
		Leased:    s.leased,
		Paused:    s.paused,
		Processed: s.processedCount(&m.policy),
		Failed:    s.failed().len(),
	}
	if s.leased {
		info.Lease = s.lease.info(domain, s.leaseToken(&m.policy), m.loc)
	}
	if n := s.backlog.len(); n > 0 {
		info.Backlog = s.backlog.appendTo(make([]int64, 0, n))
	}
	if err := m.finish(sh, r, &st, nil); err != nil {
		return DomainInfo{}, err
	}
	return info, nil
}

// Leases returns every lease in flight, ordered by domain. It locks one
// domain at a time, so under load it is not a snapshot of one instant.
// Leases that have expired but not yet been revoked are included, with
// their ExpiresAt in the past; Reap revokes them. ExpiresAt is the lease's
// own expiry, zero if it never expires, also for a lease restored from a
// journal written with other options (see WithLeaseTTL).
func (m *Manager) Leases() ([]LeaseInfo, error) {
	if err := m.checkOpen(); err != nil {
		return nil, err
	}
	var out []LeaseInfo
	err := m.readAll(func(domain string, r *domainRecord) {
		if r.state.leased {
			out = append(out, r.state.lease.info(domain, r.state.leaseToken(&m.policy), m.loc))
		}
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b LeaseInfo) int { return strings.Compare(a.Domain, b.Domain) })
	return out, nil
}

// Domains returns every domain the Manager knows, sorted: each domain that
// some transition created (a grant, an enqueue, a Pause, a Kill) and Forget
// has not dropped since, whether it is in flight, idle or only holds history.
// A Manager rebuilt from a journal knows the same domains. Like Leases, it
// looks at one domain at a time, so under load it is not a snapshot of one
// instant. It changes nothing and never reads the clock.
func (m *Manager) Domains() ([]string, error) {
	if err := m.checkOpen(); err != nil {
		return nil, err
	}
	var out []string
	if err := m.readAll(func(domain string, _ *domainRecord) { out = append(out, domain) }); err != nil {
		return nil, err
	}
	slices.Sort(out)
	return out, nil
}

// DeadLetters returns domain's failed offsets in ascending order, with why
// and when each failed. Like Leases, it does not revoke expired leases: an
// offset whose last lease ran out shows up once its domain is touched or
// reaped. With domain "", which is never a domain (see ErrInvalidDomain),
// it returns those of every domain, ordered by domain then offset; any
// other domain is checked as every call checks one.
func (m *Manager) DeadLetters(domain string) ([]DeadLetter, error) {
	if err := m.checkOpen(); err != nil {
		return nil, err
	}
	var out []DeadLetter
	if domain != "" {
		if !m.accepts(domain, 0) {
			return nil, m.refuse(&callDeadLetters, domain, 0)
		}
		_, r := m.lockRecord(domain, false)
		if r == nil {
			return nil, m.absent(nil)
		}
		out = r.state.failed().appendTo(out, domain, m.loc)
		seq := r.lastSeq
		r.mu.Unlock()
		if err := m.waitDurable(seq, nil); err != nil {
			return nil, err
		}
		return out, nil
	}
	err := m.readAll(func(domain string, r *domainRecord) {
		out = r.state.failed().appendTo(out, domain, m.loc)
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b DeadLetter) int {
		return cmp.Or(strings.Compare(a.Domain, b.Domain), cmp.Compare(a.Offset, b.Offset))
	})
	return out, nil
}

// adminCall checks the call's domain and offset (0 for a call that takes
// none), then runs op on domain's record, locked, and reports the head the
// domain will grant next if it is idle and running afterwards. For a domain
// the Manager has never seen, adminCall creates a record if create is set,
// and otherwise returns unknown (which may be nil: nothing to do).
func (m *Manager) adminCall(c *callSpec, domain string, offset int64, op func(s *domainState, st *step) error) (Head, error) {
	sh, r, now, err := m.enter(c, domain, offset)
	if r == nil {
		return Head{}, err
	}
	st := step{now: now, kept: m.stepBuffer()}
	var h Head
	err = op(&r.state, &st)
	if err == nil {
		h.Next, h.HasNext = r.state.next(now)
	}
	if ferr := m.finish(sh, r, &st, nil); ferr != nil {
		return Head{}, ferr
	}
	return h, c.wrap(domain, err)
}

// Kill makes offset failed whatever its state, with reason as its cause: a
// queued offset leaves the backlog; an offset in flight loses its lease,
// whose holder is then refused with ErrLeaseRevoked; an offset never seen is
// failed before it arrives. Killing a failed offset changes nothing; killing
// a processed one returns ErrAlreadyProcessed.
//
// With WithMonotonicOffsets, Kill fails only offsets that are queued or in
// flight. Any other offset not failed yet is either at or below the
// domain's highest finished offset, and counts as processed
// (ErrAlreadyProcessed), or above it: then Kill returns ErrOffsetAhead and
// changes nothing, since failing it would make every offset below it count
// as processed, silently dropping that work. On a domain the Manager does
// not know, every offset is ahead.
//
// The dead letter keeps reason as its cause, cut to MaxCauseLen bytes; an
// empty reason leaves it no cause (nil).
//
// If the domain is then idle and running with a backlog, Kill returns its
// head (Head.HasNext): acquire it to keep the domain moving.
func (m *Manager) Kill(domain string, offset int64, reason string) (Head, error) {
	cause := reasonCause(reason)
	// Under WithMonotonicOffsets, a domain the Manager does not know has
	// no offset Kill may fail.
	c := &callKill
	if m != nil && m.policy.monotonic {
		c = &callKillAhead
	}
	return m.adminCall(c, domain, offset, func(s *domainState, st *step) error {
		return s.kill(&m.policy, st, offset, cause)
	})
}

// Cancel ends offset of domain so that it never runs: an offset queued
// (scheduled or not) leaves the backlog, and, if inFlight is set, the
// offset in flight loses its lease, whose holder is then refused with
// ErrLeaseRevoked, as after Kill. A cancelled offset is terminal without
// being a dead letter: it counts as processed (TryAcquire and Enqueue
// answer AlreadyProcessed for it, and Inspect counts it in Processed), its
// payload goes, and it is reported as an EventCancelled and counted in
// Stats.Cancelled. Kill is the operator's call to fail an offset instead.
//
// Cancel returns an error matching ErrInFlight for the offset in flight
// without inFlight, ErrAlreadyProcessed for one that counts as processed
// (a cancelled one too), and ErrNotQueued for any other (never seen, or a
// dead letter); then it changes nothing. It checks its domain and offset
// as every call does, first.
//
// If the domain is then idle and running with a backlog, Cancel returns
// its head (Head.HasNext): acquire it to keep the domain moving.
func (m *Manager) Cancel(domain string, offset int64, inFlight bool) (Head, error) {
	return m.adminCall(&callCancel, domain, offset, func(s *domainState, st *step) error {
		return s.cancel(&m.policy, st, offset, inFlight)
	})
}

// Redrive takes offset out of the failed set and puts it at the front of
// its domain's backlog with a fresh attempt count, so that it runs next and
// order is kept. It is a deliberate exception to idempotence. It returns
// ErrNotDeadLettered if the offset is not failed, and ErrInvalidOffset, like
// every call, for a negative one.
//
// If the domain is idle and running, Redrive returns the offset as its head
// (Head.HasNext): acquire it.
func (m *Manager) Redrive(domain string, offset int64) (Head, error) {
	return m.adminCall(&callRedrive, domain, offset, func(s *domainState, st *step) error {
		return s.redrive(&m.policy, st, offset)
	})
}

// ForceRelease takes the domain's lease back from a holder that is stuck:
// the holder is then refused with ErrLeaseRevoked, and the offset goes back
// to the front of the backlog, keeping its attempt count and first-acquired
// time, to be granted again under a new token. It returns ErrNoLease if the
// domain holds none.
//
// If the domain is running, ForceRelease returns the offset as its head
// (Head.HasNext): acquire it.
func (m *Manager) ForceRelease(domain string) (Head, error) {
	return m.adminCall(&callForceRelease, domain, 0, func(s *domainState, st *step) error {
		return s.forceRelease(&m.policy, st)
	})
}

// Pause stops domain from granting leases until Resume: its lease in flight,
// if any, carries on, and TryAcquire of any offset that would otherwise be
// granted answers Enqueued and queues it. The other answers do not change:
// a processed or failed offset still answers AlreadyProcessed or
// AlreadyFailed, and the offset in flight AlreadyAcquired. Pausing a paused
// domain changes nothing; a paused domain cannot be forgotten (see Forget).
func (m *Manager) Pause(domain string) error {
	_, err := m.adminCall(&callPause, domain, 0, func(s *domainState, st *step) error {
		s.setPaused(&m.policy, st, true)
		return nil
	})
	return err
}

// Resume lets a paused or parked domain grant leases again. If it is idle
// with a backlog, Resume returns the backlog's head (Head.HasNext): acquire
// it. Resuming a running or unknown domain changes nothing.
func (m *Manager) Resume(domain string) (Head, error) {
	return m.adminCall(&callResume, domain, 0, func(s *domainState, st *step) error {
		s.setPaused(&m.policy, st, false)
		return nil
	})
}

// Forget drops domain and all its history, processed and failed offsets
// included, to free its memory: a deliberate exception to idempotence, since
// its old offsets can then be acquired again. The domain must be idle,
// running and with an empty backlog, or Forget returns ErrDomainBusy and
// changes nothing: a paused or parked domain is refused, since forgetting
// it would drop the pause; Resume it first. If the domain comes
// back, its fences carry on above every fence it had before. Forgetting an
// unknown domain changes nothing.
func (m *Manager) Forget(domain string) error {
	sh, r, now, err := m.enter(&callForget, domain, 0)
	if r == nil {
		return err
	}
	st := step{now: now, kept: m.stepBuffer()}
	if err := r.state.forget(&m.policy, &st); err != nil {
		if ferr := m.finish(sh, r, &st, nil); ferr != nil {
			return ferr
		}
		return callForget.wrap(domain, err)
	}
	m.raiseFenceFloor(r.state.issued.fence)
	r.dropped = true
	if err := m.finish(sh, r, &st, nil); err != nil {
		return err
	}
	m.unlinkDrained(r)
	return nil
}
