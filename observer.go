package worklease

import (
	"strconv"
	"sync"
	"time"
)

// EventKind names a transition of a domain's state.
type EventKind uint8

// The transitions an Observer is told about. Every one is also counted in
// Stats. (The events a worker pool tells follow them.)
const (
	_ EventKind = iota // the zero value is not a kind

	// EventAcquired: an offset was granted; Attempt is its attempt number:
	// one more than the attempts it made before, failed or force-released.
	EventAcquired
	// EventEnqueued: an offset joined the backlog (not reported again for a
	// duplicate): from TryAcquire on a busy or paused domain, or from
	// Enqueue, which never grants.
	EventEnqueued
	// EventProcessed: an offset succeeded and is terminal.
	EventProcessed
	// EventRetrying: Fail scheduled a retry, or Retry ended an attempt that
	// has retries left (an EventRequeued follows); Attempt is the retry
	// count. After Fail, with WithLeaseTTL, the lease's expiry moves to at
	// least a full TTL from now, without a separate EventExtended.
	EventRetrying
	// EventDeadLettered: an offset ran out of retries, or was killed, and is
	// failed (terminal); Cause says why.
	EventDeadLettered
	// EventExpired: a lease's time ran out and it was revoked; Token is the
	// revoked token. An EventDeadLettered follows if that was the last
	// attempt; otherwise an EventRequeued.
	EventExpired
	// EventRequeued: an offset whose lease expired or was force-released,
	// or that Retry gave back, went back to the front of the backlog;
	// Attempt is the attempts it made so far, the one just ended included,
	// and its next grant is attempt Attempt+1. An expiry and a Retry count
	// as a failed attempt (see AcquireResult.RetryCount); a forced release
	// does not.
	EventRequeued
	// EventExtended: a lease's expiry moved later.
	EventExtended
	// EventRejected: Succeed, Fail or Extend on a domain the Manager knows
	// was refused for Token; Cause is the error returned (ErrTokenMismatch,
	// ErrNoLease, ErrLeaseExpired or ErrLeaseRevoked). Offset is the lease
	// in flight, or -1. (On an unknown domain they are no event; see
	// WithObserver.)
	EventRejected
	// EventOutOfOrder: with WithBestEffortOrdering, an offset other than the
	// backlog's head was granted; an EventAcquired follows.
	EventOutOfOrder
	// EventKilled: an operator made an offset failed with Kill; an
	// EventDeadLettered follows.
	EventKilled
	// EventRedriven: an operator put a failed offset back at the front of
	// the backlog with Redrive.
	EventRedriven
	// EventReleased: an operator took a lease back with ForceRelease; an
	// EventRequeued follows.
	EventReleased
	// EventPaused and EventResumed: the domain stopped or started granting
	// leases (Pause, Resume, or parking on a dead letter).
	EventPaused
	EventResumed
	// EventForgotten: the domain and its history were dropped by Forget.
	EventForgotten

	numEventKinds = iota // the transitions' kinds end here; journals and Stats hold no others
)

// The events a worker pool tells its observer (see the worker package),
// never a backend: they are no transition of a domain's state, so a
// journal never holds them and Stats does not count them. Passing the
// same Observer to the backend and to the pool gives every event of a job
// once: the pool's, and the backend's transitions.
const (
	// EventStarted: a worker pool started a handler on an offset it
	// claimed; Attempt and Token are the claim's.
	EventStarted EventKind = numEventKinds + iota
	// EventLeaseLost: a worker pool found, renewing or ending a lease it
	// worked under, that the lease was gone; Cause says how (an error
	// matching ErrLeaseExpired, ErrLeaseRevoked, ErrTokenMismatch or
	// ErrNoLease), and Token is the lost lease's.
	EventLeaseLost

	numKinds = numEventKinds + iota
)

// RecordSettings is the Kind of a journal Record that is no transition and
// never an Event: it states how the records after it read, with
// Record.Monotonic saying whether they were written WithMonotonicOffsets.
// Its Offset is -1 and its other fields are zero. A Manager writes one just
// before its first record when the journal does not state its own setting
// already (it states none, or another); replay reads each part of a journal
// under the setting it was written with (see WithMonotonicOffsets).
// Observers and Stats never see it. Its value lies far above the event
// kinds, which may grow.
const RecordSettings EventKind = 128

var eventKindNames = [numKinds]string{
	EventAcquired:     "Acquired",
	EventEnqueued:     "Enqueued",
	EventProcessed:    "Processed",
	EventRetrying:     "Retrying",
	EventDeadLettered: "DeadLettered",
	EventExpired:      "Expired",
	EventRequeued:     "Requeued",
	EventExtended:     "Extended",
	EventRejected:     "Rejected",
	EventOutOfOrder:   "OutOfOrder",
	EventKilled:       "Killed",
	EventRedriven:     "Redriven",
	EventReleased:     "Released",
	EventPaused:       "Paused",
	EventResumed:      "Resumed",
	EventForgotten:    "Forgotten",
	EventStarted:      "Started",
	EventLeaseLost:    "LeaseLost",
}

// String returns the kind's name without the Event prefix, e.g.
// "Processed", and "Settings" for RecordSettings.
func (k EventKind) String() string {
	if k > 0 && int(k) < numKinds {
		return eventKindNames[k]
	}
	if k == RecordSettings {
		return "Settings"
	}
	return "EventKind(" + strconv.Itoa(int(k)) + ")"
}

// An Event reports one transition of one domain. The message it concerns is
// identified by Domain and Offset.
type Event struct {
	Kind    EventKind
	Domain  string
	Offset  int64 // -1 when the event concerns no offset
	Attempt int   // the attempt number of the offset, when it has one
	Token   Token // the lease's token, when there is one
	// Cause says why, for failures, dead letters, rejections and parking.
	// A Fail cause is the caller's under errors.Is and errors.As, with its
	// text cut to MaxCauseLen; unlike a dead letter, an event keeps a Fail
	// cause whose text is empty (an empty Kill reason is no cause).
	Cause error
	At    time.Time // the Manager's clock when the transition happened
}

// An Observer is told about every transition. See WithObserver; a worker
// pool tells one about its jobs too (EventStarted, EventLeaseLost).
type Observer interface {
	Observe(Event)
}

// ObserverFunc adapts a function to an Observer.
type ObserverFunc func(Event)

// Observe calls f(e).
func (f ObserverFunc) Observe(e Event) { f(e) }

// report journals the changes st kept of r, which is locked, and queues
// them for the observer, to be delivered once the lock is released. It
// returns the journal's first error; nothing is journaled after it.
func (m *Manager) report(sh *shard, r *record, st *step) error {
	var err error
	for i := range st.n {
		c := st.change(i)
		if m.observer != nil {
			q := r.extra.events
			q.mu.Lock()
			q.pending = append(q.pending, Event{
				Kind: c.kind, Domain: r.domain, Offset: c.offset, Attempt: c.attempt, Token: c.token, Cause: c.cause, At: st.now.in(m.loc),
			})
			q.mu.Unlock()
		}
		if m.journal == nil || err != nil || !c.journaled() {
			continue
		}
		rec := c.record(r.domain, st.now)
		if c.kind != EventForgotten {
			err = m.journalRecord(r, rec)
			continue
		}
		// The domain's fence: a new record of the domain starts above it,
		// after a replay too. A snapshot under way learns of the record.
		rec.Fence = r.state.issued.fence
		if err = m.journalRecord(r, rec); err == nil {
			m.snapshots.forgotten(r.domain, r.lastSeq)
		}
	}
	return err
}

// journalRecord appends rec, a record of r, which is locked, to the
// journal, and makes it r's latest. The first record a Manager journals
// after New is preceded by one that says how the journal reads (see
// appendSettings).
func (m *Manager) journalRecord(r *record, rec Record) error {
	if m.settingsDue.Load() {
		if err := m.appendSettings(); err != nil {
			return err
		}
	}
	seq, err := m.journal.AppendRecord(rec)
	if err != nil {
		return err
	}
	r.lastSeq = seq
	return nil
}

// appendSettings journals a RecordSettings record stating the Manager's
// setting, once, ahead of every other record a call journals after New.
// Calls on other domains that get here meanwhile wait for it, under their
// domain's lock, so that their records follow it.
func (m *Manager) appendSettings() error {
	m.settingsMu.Lock()
	defer m.settingsMu.Unlock()
	if !m.settingsDue.Load() {
		return nil
	}
	if _, err := m.journal.AppendRecord(m.policy.settings()); err != nil {
		return err
	}
	m.settingsDue.Store(false)
	return nil
}

// eventQueue holds a domain's events until they are delivered.
type eventQueue struct {
	mu         sync.Mutex // guards everything below; taken after the record's mu, never before
	pending    []Event    // emitted, not yet handed to a deliverer
	spare      []Event    // a delivered batch's buffer, kept for reuse
	delivering bool       // a goroutine is calling the observer with this queue's events
}

// deliver hands r's queued events to the observer in order. r.mu must not
// be held. At most one goroutine delivers a domain's events at a time, which
// keeps them in order; a goroutine that finds another delivering leaves its
// events to it. That includes an observer that calls back into the same
// domain: its events are delivered after it returns, never deadlocking.
// The queue is the domain's, not the record's: a record that replaces one
// Forget dropped takes its queue over (see Manager.replace), so that its
// events follow the dropped record's.
func (m *Manager) deliver(r *record) {
	if m.observer == nil {
		return
	}
	q := r.extra.events
	q.mu.Lock()
	for !q.delivering && len(q.pending) > 0 {
		batch := q.pending
		q.pending, q.spare = q.spare[:0], nil
		q.delivering = true
		q.mu.Unlock()
		m.observeAll(q, batch)
		q.mu.Lock()
		q.delivering = false
		clear(batch) // drop references to causes
		if q.spare == nil {
			q.spare = batch[:0]
		}
	}
	q.mu.Unlock()
	r.mu.Lock()
	dropped := r.dropped
	r.mu.Unlock()
	if dropped { // Forget left r in the map until its last events went out
		m.unlinkDrained(r)
	}
}

// drained reports whether q has no event left to deliver and none being
// delivered. A nil queue (no observer) is drained.
func (q *eventQueue) drained() bool {
	if q == nil {
		return true
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	return !q.delivering && len(q.pending) == 0
}

// observeAll calls the observer with each event. If it panics, the queue is
// marked as no longer delivering so that later events still go out.
func (m *Manager) observeAll(q *eventQueue, batch []Event) {
	sent := 0
	defer func() {
		if p := recover(); p != nil {
			// The events after the one that panicked go out with the next
			// delivery, ahead of any emitted since.
			q.mu.Lock()
			q.pending = append(append([]Event(nil), batch[sent+1:]...), q.pending...)
			q.delivering = false
			q.mu.Unlock()
			panic(p)
		}
	}()
	for _, ev := range batch {
		m.observer.Observe(ev)
		sent++
	}
}
