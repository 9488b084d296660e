package worklease

import (
	"strconv"
	"time"
)

// The kinds of transitions, and the events an Observer is told of them.

// EventKind names a transition of a domain's state.
//
// The transitions' values, 1 to 17, and RecordSettings' are frozen: a
// journal stores a Record's Kind as this number (see Record.AppendBinary),
// and the PostgreSQL backend's schema writes the same numbers in its SQL
// and counts events by them. They are never renumbered and never reused;
// a new transition takes the next number. TestEventKindsAreFrozen fails if
// one moves. The worker pool's kinds (EventStarted, EventLeaseLost) are
// never stored: their values follow the transitions' and move when one is
// added, so compare them by name.
type EventKind uint8

// The transitions an Observer is told about. Every one is also counted in
// Stats. (The events a worker pool tells follow them.) Their values are
// frozen (see EventKind).
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
	// EventCancelled: Cancel ended a queued or scheduled offset, or one in
	// flight (whose Token is the revoked lease's), which never runs: it
	// counts as processed, and is no dead letter. Attempt is its attempts
	// made so far.
	EventCancelled

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
	EventCancelled:    "Cancelled",
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
