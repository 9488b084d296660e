package worklease

import (
	"errors"
	"fmt"
)

// Errors returned by the Manager. They report bugs in the caller (seed 000's
// "hard bugs") or misuse, never a normal outcome, and a call that returns one
// has changed nothing. Returned errors may wrap these with the domain and
// other context; test for them with errors.Is.
var (
	// ErrBacklogOrder is returned by TryAcquire when the domain is idle, its
	// backlog is not empty, and the offset asked for is not the backlog's
	// head. The error is always a *BacklogOrderError.
	ErrBacklogOrder = errors.New("worklease: offset is not the head of the backlog")

	// ErrTokenMismatch is returned by Succeed and Fail when the domain holds a
	// lease but the token passed is not that lease's token: the caller is a
	// stale holder, or passed a token from another domain or manager.
	ErrTokenMismatch = errors.New("worklease: token does not match the current lease")

	// ErrNoLease is returned by Succeed and Fail when the domain holds no lease.
	ErrNoLease = errors.New("worklease: domain holds no lease")

	// ErrClosed is returned by every call on a Manager after Close.
	ErrClosed = errors.New("worklease: manager is closed")

	// ErrInvalidOffset is returned for a negative offset. Offsets, like Kafka
	// offsets, are non-negative.
	ErrInvalidOffset = errors.New("worklease: offset must be non-negative")

	// ErrInvalidConfig is returned by New when an option has an invalid value.
	ErrInvalidConfig = errors.New("worklease: invalid configuration")
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
	return fmt.Errorf("%w (%s on domain %q)", err, op, domain)
}
