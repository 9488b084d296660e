package worker

import (
	"errors"
	"fmt"
)

// Errors of a Pool.
var (
	// ErrQueueFull is returned by Submit, with WithSubmitNoWait, when the
	// queue limit is reached (see WithQueueLimit).
	ErrQueueFull = errors.New("worker: queue full")
	// ErrStopped is returned by Submit and Run once the Pool is stopped or
	// stopping, and is the cause (context.Cause) of a handler's context
	// that Stop cancelled.
	ErrStopped = errors.New("worker: stopped")
	// ErrLeaseLost is the cause (context.Cause) of a handler's context
	// that the Pool cancelled because, renewing the lease the handler
	// works under, it found the lease gone: expired, revoked by an
	// operator, or taken over. The cause also matches the backend's error
	// that said so (worklease.ErrLeaseExpired, say).
	ErrLeaseLost = errors.New("worker: lease lost")
)

// A PanicError is the cause of an attempt whose handler panicked: the
// Pool recovers the panic, ends the attempt as failed with a PanicError as
// its cause, and the worker goes on with other work. It unwraps to the
// panic's value if that is an error.
type PanicError struct {
	Value any    // what the handler panicked with
	Stack []byte // the handler's goroutine's stack when it panicked
}

// Error returns the panic's value and the stack, which a dead letter
// keeps (cut to worklease.MaxCauseLen).
func (e *PanicError) Error() string {
	return fmt.Sprintf("worker: handler panicked: %v\n\n%s", e.Value, e.Stack)
}

// Unwrap returns the panic's value if it is an error, and nil otherwise.
func (e *PanicError) Unwrap() error {
	err, _ := e.Value.(error)
	return err
}

// leaseLostError is the cause of a handler's context cancelled because
// its lease was lost: ErrLeaseLost, and the backend's error that said so.
type leaseLostError struct{ err error }

func (e *leaseLostError) Error() string { return "worker: lease lost: " + e.err.Error() }
func (e *leaseLostError) Unwrap() []error {
	return []error{ErrLeaseLost, e.err}
}
