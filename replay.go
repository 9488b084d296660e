package worklease

import (
	"errors"
	"fmt"
)

// replay rebuilds the Manager from its journal: the latest snapshot, then
// every record after it, each checked against the state before it (a grant
// needs a free domain and a higher fence, a completion the lease it names,
// and so on). Replay never guesses: a record that does not
// fit the state before it is an error. Nothing is counted in Stats or told
// to an observer; those report new transitions only.
func (m *Manager) replay() error {
	m.replaying = &replayState{forgotten: make(map[string]uint64), ended: make(map[string]endedLease), policy: m.policy}
	defer func() { m.replaying = nil }()
	var skip map[string]uint64 // domains forgotten while the snapshot was written
	err := m.journal.ReplayRecords(
		func(snapshot []byte) error {
			var err error
			if skip, err = m.restoreSnapshot(snapshot); err != nil {
				return &ReplayError{Err: err}
			}
			return nil
		},
		func(seq uint64, rec Record) error {
			if rec.Kind == RecordSettings {
				if err := m.replaySettings(rec); err != nil {
					return &ReplayError{Seq: seq, Record: rec, Err: err}
				}
				return nil
			}
			if seq <= skip[rec.Domain] {
				return nil
			}
			if err := m.replayRecord(seq, rec); err != nil {
				return &ReplayError{Seq: seq, Record: rec, Err: err}
			}
			return nil
		})
	if err != nil {
		if !errors.Is(err, ErrReplay) {
			err = fmt.Errorf("worklease: journal replay: %w", err)
		}
		return err
	}
	// The state is under the rule the journal's latest part was written
	// with; the Manager goes on under its own, and says so in the journal
	// with its first record unless the journal says so already.
	rs := m.replaying
	due := !rs.recorded || rs.policy.monotonic != m.policy.monotonic
	m.settleAndSwitch(m.policy.monotonic)
	m.settingsDue.Store(due)
	m.syncAllDead() // records applied without a step's end: see finish
	return m.checkInvariants()
}

// replaySettings replays a RecordSettings record. The Manager that wrote it
// did so after its New had replayed the journal, settled the calls cut
// short and switched the state to its own rule: replay does the same here.
func (m *Manager) replaySettings(rec Record) error {
	if rec.Domain != "" || rec.Offset != -1 || rec.fields()&^fieldMonotonic != 0 {
		return errors.New("settings record with the fields of a transition")
	}
	m.settleAndSwitch(rec.Monotonic)
	m.replaying.recorded = true
	return nil
}

// settleAndSwitch settles every lease whose follow-up record is missing
// (see settleEnded) and goes on under the watermark rule of
// WithMonotonicOffsets if toMonotonic is set, the exact rule otherwise.
// Where either rule is the watermark, the offsets are settled under it, so
// that an offset which never finished is queued again rather than counted
// processed: before a switch off it, after a switch to it.
func (m *Manager) settleAndSwitch(toMonotonic bool) {
	p := &m.replaying.policy
	if toMonotonic && !p.monotonic {
		m.switchRule(true)
		p.monotonic = true
	}
	m.settleAllEnded()
	if p.monotonic != toMonotonic {
		m.switchRule(toMonotonic)
		p.monotonic = toMonotonic
	}
}

// settleAllEnded settles every lease whose follow-up record is missing
// (see settleEnded).
func (m *Manager) settleAllEnded() {
	for domain, l := range m.replaying.ended {
		m.settleEnded(domain, l)
	}
	clear(m.replaying.ended)
}

// switchRule converts every domain to the exact rule or the watermark rule
// of WithMonotonicOffsets (see domainState.switchRule).
func (m *Manager) switchRule(toMonotonic bool) {
	m.forEachRecord(func(_ *shard, _ string, r *domainRecord) {
		r.mu.Lock()
		r.state.switchRule(toMonotonic)
		r.mu.Unlock()
	})
}

// replayState is what replay needs beyond the Manager's own state.
type replayState struct {
	// base is the fence floor when the snapshot began, a floor every domain
	// created afterwards started at or above; forgotten holds the last fence
	// of each domain a replayed Forget dropped. A domain created during
	// replay starts at the larger of the two: never above where it started
	// live (the global floor may have risen through other domains' Forget
	// calls meanwhile), never below a fence its name had before.
	base      uint64
	forgotten map[string]uint64
	// ended holds, per domain, the lease the domain's latest record ended
	// without its holder (an expiry, a forced release or a kill in flight).
	// Live, the same call's next record of the domain requeues or fails
	// its offset; until replay applies that record, the offset is neither
	// leased, queued nor terminal, which under WithMonotonicOffsets would
	// make it count as processed if it is below the highest terminal
	// offset. See settleEnded for a call cut short between the two.
	ended map[string]endedLease
	// policy is the Manager's, but with the rule the records being replayed
	// were written under: the one the latest settings record or the
	// snapshot states, if recorded, or else the Manager's own (journals
	// written before they recorded it read as they always did).
	policy   policy
	recorded bool
}

// An endedLease is a lease a record ended without its holder: its offset,
// and the attempts its offset carries if it goes back to the backlog.
type endedLease struct {
	offset int64
	a      attempt
}

// endsLease reports whether rec ends the domain's lease without its holder,
// leaving its offset to the record that follows.
func endsLease(rec Record) bool {
	switch rec.Kind {
	case EventExpired, EventReleased:
		return true
	case EventKilled:
		return !rec.Token.IsZero() // a kill in flight
	}
	return false
}

func (s *replayState) floor(domain string) uint64 { return max(s.base, s.forgotten[domain]) }

// noteForgotten records that domain was dropped at fence.
func (m *Manager) noteForgotten(domain string, fence uint64) {
	m.raiseFenceFloor(fence)
	if m.replaying != nil {
		m.replaying.forgotten[domain] = max(m.replaying.forgotten[domain], fence)
	}
}

// settleEnded settles the offset of the lease l, which the domain's last
// replayed record ended, when the record that should follow is missing: the
// call that wrote them was cut short (a crash between two batches, or an
// append that failed), never returned, and the Manager went on after a
// restart without it. Without WithMonotonicOffsets the offset is then
// neither leased, queued nor terminal: free, as the Manager replaying the
// journal then found it. With the option, an offset at or below hw would
// count as processed although it never finished; it goes back to the front
// of the backlog instead, keeping its attempts, as ForceRelease puts one.
// Every replay settles alike, so the Manager that went on after the restart
// wrote records that fit.
func (m *Manager) settleEnded(domain string, l endedLease) {
	_, r := m.lockRecord(domain, false)
	if r == nil {
		return // unreachable: only a Forgotten record drops a domain, and it was not applied
	}
	defer r.mu.Unlock()
	s := &r.state
	if !s.isProcessed(&m.replaying.policy, l.offset) {
		return
	}
	s.applyRequeued(&change{kind: EventRequeued, offset: l.offset, attempt: l.a.attempts, retries: l.a.retries, acquiredAt: l.a.acquiredAt})
}

// replayRecord checks one journaled record against the state before it
// (see domainState.fits) and applies it, with the same code as the live
// call that wrote it (see domainState.apply).
func (m *Manager) replayRecord(seq uint64, rec Record) error {
	// A record that ended a lease is followed, live, by the one that
	// requeues or fails its offset. Any other record means the call was
	// cut short between the two; settleEnded decides.
	endedOffset := int64(-1)
	if l, pending := m.replaying.ended[rec.Domain]; pending {
		delete(m.replaying.ended, rec.Domain)
		if (rec.Kind == EventRequeued || rec.Kind == EventDeadLettered) && rec.Offset == l.offset {
			endedOffset = l.offset
		} else {
			m.settleEnded(rec.Domain, l)
		}
	}
	if rec.Kind == EventForgotten {
		return m.replayForgotten(seq, rec)
	}
	sh, r := m.lockRecord(rec.Domain, true)
	defer r.mu.Unlock()
	if seq <= r.lastSeq {
		return nil // the snapshot already holds it
	}
	s, p, c, at := &r.state, &m.replaying.policy, changeOf(&rec), instantOf(rec.At)
	// The lease rec may end, and what its offset carries if it goes back.
	l := endedLease{s.lease.offset, attempt{attempts: s.attempts(), retries: s.lease.retries, acquiredAt: s.lease.acquiredAt}}
	if err := s.fits(p, at, &c, endedOffset); err != nil {
		return err
	}
	s.apply(p, at, &c)
	if rec.Payload != nil && m.payloads != nil {
		s.heldAt(rec.Offset, seq) // the journal gives it back
	}
	if endsLease(rec) {
		m.replaying.ended[rec.Domain] = l
	}
	r.lastSeq = seq
	// Kept whatever the options: a lease keeps the expiry it was granted
	// with, and New decides from what replay restored whether the Manager
	// keeps the index (see Manager.expiring).
	sh.expiry.sync(r)
	return nil
}

// replayForgotten replays a Forgotten record: it drops the domain.
func (m *Manager) replayForgotten(seq uint64, rec Record) error {
	_, r := m.lockRecord(rec.Domain, false)
	if r == nil {
		return errors.New("forgets a domain that does not exist")
	}
	s := &r.state
	if seq <= r.lastSeq {
		r.mu.Unlock()
		return nil
	}
	// A paused domain is accepted: Forget took those before it refused
	// them, and such journals still replay.
	if !s.empty() {
		r.mu.Unlock()
		return errors.New("forgets a domain that is not idle and empty")
	}
	// The domain may have started live above where replay started it (see
	// replayState), never below its last grant.
	if rec.Fence < s.issued.fence {
		r.mu.Unlock()
		return fmt.Errorf("forgets fence %d, but the domain is at %d", rec.Fence, s.issued.fence)
	}
	m.noteForgotten(rec.Domain, rec.Fence)
	r.dropped = true
	r.mu.Unlock()
	m.unlink(r)
	return nil
}

// anyLeaseExpires reports whether a lease has an expiry. Replay can restore
// one into a Manager without WithLeaseTTL, whose calls must then read the
// clock to expire it (see Manager.timed).
func (m *Manager) anyLeaseExpires() bool {
	found := false
	m.forEachRecord(func(_ *shard, _ string, r *domainRecord) {
		r.mu.Lock()
		found = found || (r.state.leased && r.state.lease.expiresAt != 0)
		r.mu.Unlock()
	})
	return found
}

// timeRestoredLeases gives every lease that replay restored without an
// expiry, as a Manager without WithLeaseTTL granted it, an expiry one TTL
// from now when this Manager has a TTL, so that a holder that died with the
// old process is reaped. Each is journaled as an extension, so that every
// later replay restores the same expiry, with or without the option; a
// lease on a domain no call accepts keeps none. Like replay, it counts
// nothing in Stats and tells no observer.
func (m *Manager) timeRestoredLeases() error {
	if m.policy.ttl == 0 {
		return nil
	}
	now := m.now()
	var seq uint64
	var appendErr error
	m.forEachRecord(func(sh *shard, domain string, r *domainRecord) {
		r.mu.Lock()
		defer r.mu.Unlock()
		// A domain no call accepts (held by a journal written before
		// domains were bounded) gets no record, as Reap leaves it alone:
		// its record could be more than the journal takes.
		if !r.state.leased || r.state.lease.expiresAt != 0 || appendErr != nil || !validDomain(domain) {
			return
		}
		st := step{now: now, kept: new([stepInline]change)}
		r.state.extendTo(&m.policy, &st, now.add(m.policy.ttl))
		appendErr = m.journalChanges(r, &st)
		seq = max(seq, r.lastSeq)
		sh.expiry.sync(r)
	})
	if appendErr == nil && seq > 0 {
		appendErr = m.journal.Wait(seq)
	}
	if appendErr != nil {
		return fmt.Errorf("%w: giving a restored lease an expiry: %w", ErrJournalFailed, appendErr)
	}
	return nil
}
