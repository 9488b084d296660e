package worklease

import (
	"strconv"
	"time"
)

// The results of the calls, their statuses and the info types that describe
// leases, domains and dead letters: the words the state machine answers in
// and every backend returns. Like the other vocabulary files (events.go,
// errors.go, token.go, causes.go, limits.go, instant.go), this file uses
// nothing of the state machine or the Manager.

// AcquireStatus says what TryAcquire did.
type AcquireStatus uint8

// The outcomes of TryAcquire.
const (
	_ AcquireStatus = iota // the zero value is not a status

	// Acquired: the caller now holds the domain's lease on the offset, under
	// AcquireResult.Token. Work on it, then call Succeed or Fail.
	Acquired
	// AlreadyAcquired: the offset is the one the domain is working on now.
	// AcquireResult.Token is the holder's token, with its AcquiredAt and
	// RetryCount; nothing changed.
	AlreadyAcquired
	// Enqueued: another offset is in flight, so this one waits in the
	// domain's backlog (once, however many times it is enqueued). Acquire it
	// later, when a Succeed or Fail hint names it.
	Enqueued
	// AlreadyProcessed: the offset succeeded before; nothing changed.
	AlreadyProcessed
	// AlreadyFailed: the offset was given up on before; nothing changed.
	AlreadyFailed
	// AlreadyQueued: Enqueue, EnqueueAt or a repeated Append found the
	// offset queued already, with the same payload; nothing changed. (An
	// offset queued with another payload is refused with
	// ErrPayloadMismatch.) TryAcquire never answers it: it answers
	// Enqueued for an offset queued already, as it always has.
	AlreadyQueued
)

var acquireStatusNames = [...]string{
	Acquired:         "Acquired",
	AlreadyAcquired:  "AlreadyAcquired",
	Enqueued:         "Enqueued",
	AlreadyProcessed: "AlreadyProcessed",
	AlreadyFailed:    "AlreadyFailed",
	AlreadyQueued:    "AlreadyQueued",
}

// String returns the status's name, e.g. "Acquired".
func (s AcquireStatus) String() string {
	return statusName(acquireStatusNames[:], "AcquireStatus", uint8(s))
}

// AcquireResult is the outcome of TryAcquire.
type AcquireResult struct {
	Status AcquireStatus
	// Token, AcquiredAt, ExpiresAt and RetryCount describe the lease when
	// Status is Acquired or AlreadyAcquired, and are zero otherwise.
	// AcquiredAt is when the offset was first granted; retries and re-grants
	// after an expiry do not change it. It is the clock's reading as the
	// granting call began, taken before the domain's lock so that the clock
	// is never called under it: a grant that waited for the lock may report
	// a time a little before the previous grant's. ExpiresAt is when the
	// lease runs out unless extended (zero: never; see WithLeaseTTL).
	// RetryCount is the number of failed attempts of the offset so far (Fail
	// calls that scheduled a retry, and expiries). Together they let the
	// caller compute its backoff.
	Token      Token
	AcquiredAt time.Time
	ExpiresAt  time.Time
	RetryCount int
}

// AppendResult is the outcome of Append.
type AppendResult struct {
	// Offset is the offset the domain assigned to the payload, or, for an
	// Append repeated with the idempotency key of an earlier one, the
	// offset that one was assigned.
	Offset int64
	// Status is Enqueued for an offset stored by this call. An Append
	// repeated with a key stores nothing and answers with its offset's
	// state: AlreadyQueued, AlreadyAcquired, AlreadyProcessed or
	// AlreadyFailed.
	Status AcquireStatus
}

// SucceedStatus says what Succeed or SucceedNext did.
type SucceedStatus uint8

// The outcomes of Succeed and SucceedNext. Whatever the status, the offset
// is processed. Succeed hands nothing off, so the domain is then idle;
// SucceedNext leases the backlog's head to its caller (NextAcquired) when
// there is one and the domain is not paused.
const (
	_ SucceedStatus = iota // the zero value is not a status

	// NoBacklog: the domain's backlog is empty, and the domain is idle.
	NoBacklog
	// NextHint: SucceedResult.Next is the head of the backlog, the only
	// offset the domain will grant next. It is still queued: acquire it with
	// TryAcquire (while the domain is paused, that answers Enqueued until
	// Resume). SucceedNext returns NextHint only for a paused domain.
	NextHint
	// NextAcquired: SucceedNext leased the backlog's head to the caller, as
	// TryAcquire of that offset would have: SucceedResult.Lease describes
	// the lease now held. The domain was never idle in between, so an
	// offset offered meanwhile is queued behind it.
	NextAcquired
)

var succeedStatusNames = [...]string{
	NoBacklog:    "NoBacklog",
	NextHint:     "NextHint",
	NextAcquired: "NextAcquired",
}

// String returns the status's name, e.g. "NextHint".
func (s SucceedStatus) String() string {
	return statusName(succeedStatusNames[:], "SucceedStatus", uint8(s))
}

// SucceedResult is the outcome of Succeed and SucceedNext.
type SucceedResult struct {
	Status SucceedStatus
	Next   int64 // the backlog's head when Status is NextHint; zero otherwise
	// Lease is the lease SucceedNext granted when Status is NextAcquired,
	// under a new token, and zero otherwise. Its AcquiredAt and RetryCount
	// carry over, as with TryAcquire, if the offset was granted before and
	// went back to the backlog (an expiry, ForceRelease).
	Lease LeaseInfo
}

// FailStatus says what Fail or FailNext did.
type FailStatus uint8

// The outcomes of Fail and FailNext.
const (
	_ FailStatus = iota // the zero value is not a status

	// RetryScheduled: the caller keeps the lease, under the same token, and
	// should try the offset again after a backoff of its choosing.
	// FailResult.RetryCount is the number of retries scheduled so far.
	RetryScheduled
	// GiveUpNoBacklog: the offset ran out of retries and is now failed
	// (terminal); the lease is released and the backlog is empty.
	GiveUpNoBacklog
	// GiveUpNextHint: as GiveUpNoBacklog, but the backlog is not empty:
	// FailResult.Next is its head, still queued. Only Fail returns it.
	GiveUpNextHint
	// GiveUpParked: as GiveUpNoBacklog, but the domain is paused, by Pause
	// or parked by WithParkOnDeadLetter: it grants nothing, its backlog
	// waiting, until Resume.
	GiveUpParked
	// GiveUpNextAcquired: as GiveUpNextHint, but FailNext leased the
	// backlog's head to the caller, as TryAcquire of that offset would
	// have: FailResult.Lease describes the lease now held.
	GiveUpNextAcquired
)

var failStatusNames = [...]string{
	RetryScheduled:     "RetryScheduled",
	GiveUpNoBacklog:    "GiveUpNoBacklog",
	GiveUpNextHint:     "GiveUpNextHint",
	GiveUpParked:       "GiveUpParked",
	GiveUpNextAcquired: "GiveUpNextAcquired",
}

// String returns the status's name, e.g. "RetryScheduled".
func (s FailStatus) String() string { return statusName(failStatusNames[:], "FailStatus", uint8(s)) }

// FailResult is the outcome of Fail and FailNext.
type FailResult struct {
	Status FailStatus
	// RetryCount is the number of retries scheduled for the offset: after a
	// RetryScheduled it includes this one; after a give-up it is the count
	// the offset reached.
	RetryCount int
	Next       int64 // the backlog's head when Status is GiveUpNextHint; zero otherwise
	// Lease is the lease FailNext granted when Status is GiveUpNextAcquired,
	// under a new token, and zero otherwise; see SucceedResult.Lease.
	Lease LeaseInfo
}

// A Claim is one lease Claim granted: the head of its domain, with what
// Enqueue stored with it.
type Claim struct {
	Domain    string
	Offset    int64
	Payload   []byte // nil if the offset was stored without one
	Token     Token
	Attempt   int       // this grant's attempt number: 1, then one more after each failed attempt
	ExpiresAt time.Time // zero if leases never expire
}

// A RetryResult is what Retry did.
type RetryResult struct {
	// DeadLettered: the offset ran out of retries and is failed, with the
	// cause given; otherwise it waits at the front of its domain's line.
	DeadLettered bool
	// RetryCount is the offset's failed attempts so far, this one
	// included: pass it to Backoff.Delay for the next delay. (Fail's
	// RetryCount counts the retries scheduled, not the attempts failed:
	// after a give-up they differ by one.)
	RetryCount int
}

// DomainInfo is a copy of one domain's state, as Inspect reports it.
type DomainInfo struct {
	// Leased reports whether an offset is in flight; Lease describes it then.
	Leased bool
	Lease  LeaseInfo
	// Paused reports that the domain grants nothing until Resume.
	Paused bool
	// Backlog lists the queued offsets, the next one to be granted first.
	Backlog []int64
	// Processed and Failed count the domain's terminal offsets. With
	// WithMonotonicOffsets, Processed counts every offset that counts as
	// processed, those the domain never saw included, up to math.MaxInt64.
	Processed int64
	Failed    int64
}

// LeaseInfo describes a lease in flight.
type LeaseInfo struct {
	Domain     string
	Offset     int64
	Token      Token
	AcquiredAt time.Time // when the offset was first granted
	ExpiresAt  time.Time // zero: never
	RetryCount int       // failed attempts of the offset so far
}

// Head reports the offset a domain will grant next when a call leaves it
// idle and running with a backlog. No Succeed or Fail will hint at that
// offset, so the caller acquires it (TryAcquire) to keep the domain moving.
// Redrive, Kill, ForceRelease and Resume return one, and Reap one for each
// lease it revokes (see Expiry).
type Head struct {
	Next    int64 // the backlog's head, when HasNext; zero otherwise
	HasNext bool  // the domain is idle and running with a backlog
}

// Expiry describes a lease that Reap revoked because its time ran out.
type Expiry struct {
	Domain string
	Offset int64
	Token  Token // the revoked lease's token, now refused with ErrLeaseExpired
	// Attempts is the number of attempts of the offset so far, the expired
	// one included.
	Attempts int
	// DeadLettered reports that this was the offset's last attempt: it is
	// now failed. Otherwise it is back at the front of its domain's backlog,
	// to be granted again under a new token.
	DeadLettered bool
	// Head reports the offset the domain will grant next when the domain
	// is idle and running: acquire it to keep the domain moving. That is
	// Offset itself unless it was dead-lettered.
	Head
}

// DeadLetter describes a failed offset: one that ran out of retries, whose
// lease expired too often, or that an operator killed. It stays failed, and
// TryAcquire answers AlreadyFailed for it, until Redrive.
type DeadLetter struct {
	Domain string
	Offset int64
	// Cause is the last failure: Fail's cause, ErrLeaseExpired, or Kill's
	// reason, its text cut to MaxCauseLen bytes. It is nil if there was
	// none, or if its text was empty: a journal keeps a cause as its text,
	// so an empty one reads the same before and after a restart. After a
	// restart it is an error with the same text (ErrLeaseExpired and
	// ErrLeaseRevoked are restored as themselves, and a cause whose text is
	// one of theirs matches it under errors.Is before a restart too).
	Cause    error
	Attempts int       // attempts made, the last one included; 0 if killed before any
	At       time.Time // when it failed
	// Payload is what Enqueue stored with the offset, where the backend
	// keeps payloads: InspectDeadLetter fills it, and ListDeadLetters
	// when asked to; nil otherwise, and from DeadLetters.
	Payload []byte
}

// statusName returns the name of v, a value of the status type typ, from
// names; a value that is not one of typ's constants is named by its number.
func statusName(names []string, typ string, v uint8) string {
	if int(v) < len(names) && names[v] != "" {
		return names[v]
	}
	return typ + "(" + strconv.Itoa(int(v)) + ")"
}
