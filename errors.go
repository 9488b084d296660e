package worklease

import (
	"errors"
	"fmt"
)

// Errors returned by the Manager. They report bugs in the caller or misuse,
// never a normal outcome, and a call that returns one has changed nothing,
// except that, like every call on one domain that gets past its input
// checks, it first revokes the domain's lease if that has expired (see
// WithLeaseTTL). Every call checks its inputs first, in one order: the
// Manager is open (ErrClosed, or ErrJournalFailed), then the domain
// (ErrInvalidDomain), then the offset (ErrInvalidOffset), then its other
// arguments (ErrInvalidDuration). Returned errors may wrap these with the
// domain and other context; test for them with errors.Is.
var (
	// ErrBacklogOrder is returned by TryAcquire when the domain is idle, its
	// backlog is not empty, and the offset asked for is not the backlog's
	// head. The error is always a *BacklogOrderError.
	ErrBacklogOrder = errors.New("worklease: offset is not the head of the backlog")

	// ErrTokenMismatch is returned by Succeed, Fail and Extend (and Retry
	// and SucceedMany, which check tokens as they do) when the domain
	// holds a lease but the token passed is not that lease's token: the
	// caller is a stale holder, or passed a token from another domain or
	// manager.
	ErrTokenMismatch = errors.New("worklease: token does not match the current lease")

	// ErrNoLease is returned by Succeed, Fail and Extend (and Retry and
	// SucceedMany) when the domain holds no lease, and by ForceRelease when
	// it has none to release.
	ErrNoLease = errors.New("worklease: domain holds no lease")

	// ErrLeaseExpired is returned by Succeed, Fail and Extend for the token
	// of a lease that ran out of time and was revoked (see WithLeaseTTL).
	// Its offset is back at the front of the backlog, or dead-lettered if
	// that was its last attempt. A domain remembers only its latest revoked
	// token (expired, killed or force-released): that token gets this error
	// (or ErrLeaseRevoked) whether the domain is now idle or leased again,
	// before ErrNoLease and ErrTokenMismatch are considered; an older revoked
	// token gets ErrNoLease or ErrTokenMismatch, as any stale token does. See
	// Manager.Succeed for the order of checks.
	ErrLeaseExpired = errors.New("worklease: lease expired")

	// ErrLeaseRevoked is returned by Succeed, Fail and Extend for the token
	// of a lease an operator took back with Kill or ForceRelease. As with
	// ErrLeaseExpired, only the domain's latest revoked token gets it, and
	// it wins over ErrNoLease and ErrTokenMismatch; an older revoked token
	// gets one of those. See Manager.Succeed for the order of checks.
	ErrLeaseRevoked = errors.New("worklease: lease revoked by an operator")

	// ErrInvalidDuration is returned by Extend for a duration that is not
	// positive, and by Retry for a negative delay.
	ErrInvalidDuration = errors.New("worklease: duration must be positive")

	// ErrNotDeadLettered is returned by Redrive for an offset that is not
	// failed.
	ErrNotDeadLettered = errors.New("worklease: offset is not dead-lettered")

	// ErrAlreadyProcessed is returned by Kill for an offset that succeeded
	// (with WithMonotonicOffsets, one that counts as processed).
	ErrAlreadyProcessed = errors.New("worklease: offset already processed")

	// ErrDomainBusy is returned by Forget for a domain that holds a lease,
	// has a backlog, or is paused (by Pause, or parked by
	// WithParkOnDeadLetter): forgetting a paused domain would drop the
	// pause, and its next offset would run. Resume it first.
	ErrDomainBusy = errors.New("worklease: domain has a lease or a backlog, or is paused")

	// ErrClosed is returned by every call on a Manager after Close. An error
	// matching it is returned by every call on a zero or nil Manager,
	// which New did not make.
	ErrClosed = errors.New("worklease: manager is closed")

	// ErrInvalidOffset is returned by every call that takes an offset for a
	// negative one. Offsets, like Kafka offsets, are non-negative.
	ErrInvalidOffset = errors.New("worklease: offset must be non-negative")

	// ErrInvalidDomain is returned by every call that takes a domain for
	// the empty domain or one longer than MaxDomainLen bytes (except
	// DeadLetters, for which "" means every domain). The error names a long
	// domain by a short prefix and its length.
	ErrInvalidDomain = errors.New("worklease: domain must be 1 to 4096 bytes long")

	// ErrOffsetAhead is returned by Kill, with WithMonotonicOffsets, for an
	// offset above the domain's highest finished offset that is neither
	// queued nor in flight: failing it would make every offset below it
	// that the domain has not seen count as processed, and an operator's
	// typo would silently drop that work.
	ErrOffsetAhead = errors.New("worklease: offset is ahead of the domain's offsets")

	// ErrInvalidConfig is returned by New when an option has an invalid value.
	ErrInvalidConfig = errors.New("worklease: invalid configuration")
)

// Errors returned by the pull calls (Enqueue, Claim, WaitClaim, Retry).
var (
	// ErrInvalidClaim is returned by Claim and WaitClaim for a count below
	// 1. A backend may allow fewer leases per claim than any int: it then
	// returns an error matching ErrInvalidClaim above its limit too.
	ErrInvalidClaim = errors.New("worklease: claim count must be at least 1")

	// ErrPayloadNotJournaled was returned by Enqueue for a payload on a
	// Manager with a journal, before journals kept payloads.
	//
	// Deprecated: a journaled Manager keeps payloads in its journal; no
	// call returns it.
	ErrPayloadNotJournaled = errors.New("worklease: a journaled Manager keeps no payloads")
)

// Errors returned by the producers' calls (Enqueue, EnqueueAt, Append) and
// by Cancel. Each is returned before anything changes.
var (
	// ErrPayloadMismatch is returned by Enqueue and EnqueueAt for an
	// offset that is queued, in flight or failed with another payload
	// (one stored without a payload and one with count as different),
	// and by Append repeated with the key of an earlier Append whose
	// payload was another: the call is refused, and the payload stored
	// first stays. Two producers that number their own work collide
	// this way; Append assigns offsets that never collide.
	ErrPayloadMismatch = errors.New("worklease: offset stored with another payload")

	// ErrPayloadTooLarge is returned by Enqueue, EnqueueAt and Append for
	// a payload longer than the Manager's limit (DefaultMaxPayload, or
	// WithMaxPayload's). Nothing is stored.
	ErrPayloadTooLarge = errors.New("worklease: payload too large")

	// ErrInvalidKey is returned by Append for an idempotency key longer
	// than MaxKeyLen bytes.
	ErrInvalidKey = errors.New("worklease: idempotency key too long")

	// ErrNotQueued is returned by Cancel for an offset that is neither
	// queued, scheduled nor in flight: one the domain never held, or a
	// dead letter (Kill and Redrive are for those).
	ErrNotQueued = errors.New("worklease: offset is not queued")

	// ErrInFlight is returned by Cancel for the offset in flight unless
	// it was asked to cancel that too (inFlight).
	ErrInFlight = errors.New("worklease: offset is in flight")
)

// BacklogOrderError is the error TryAcquire returns when an idle domain is
// asked to grant an offset other than the head of its backlog. It matches
// ErrBacklogOrder under errors.Is.
type BacklogOrderError struct {
	Domain   string // the domain whose order was violated
	Expected int64  // the backlog's head: the only offset that may be acquired next
	Got      int64  // the offset that was asked for
}

// Error implements error.
func (e *BacklogOrderError) Error() string {
	return fmt.Sprintf("worklease: domain %q: offset %d acquired out of order: backlog head is %d",
		e.Domain, e.Got, e.Expected)
}

// Is reports whether target is ErrBacklogOrder, so errors.Is works on both.
func (e *BacklogOrderError) Is(target error) bool { return target == ErrBacklogOrder }

// domainError adds the operation and domain to a sentinel error, keeping it
// matchable with errors.Is.
func domainError(op, domain string, err error) error {
	return fmt.Errorf("%w (%s on domain %s)", err, op, shortDomain(domain))
}

// shortDomain is how an error names domain: quoted whole if short, else
// a quoted prefix and its length, so that a huge domain never makes a huge
// error message.
func shortDomain(domain string) string {
	const show = 64
	if len(domain) <= show {
		return fmt.Sprintf("%q", domain)
	}
	return fmt.Sprintf("%q… (%d bytes)", truncateText(domain, show), len(domain))
}
