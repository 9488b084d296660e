package workleasekafka

import (
	"errors"

	"github.com/worklease/worklease/worker"
)

// Errors of a Consumer.
var (
	// ErrRevoked is the cause (context.Cause) of a handler's context that
	// the Consumer cancelled because the handler's partition was revoked
	// and the handler ran past WithRevokeTimeout, or was lost. The record
	// stays unfinished: the partition's next owner runs it again.
	ErrRevoked = errors.New("workleasekafka: partition revoked")
	// ErrStopped is the cause of a handler's context that Close, or the
	// end of Run's context, cancelled. It is worker.ErrStopped, as the
	// worker Pool the Consumer runs on cancels the handlers.
	ErrStopped = worker.ErrStopped
	// ErrNotParked is returned by Resume and Skip for a key that has no
	// record parked in a partition the Consumer owns.
	ErrNotParked = errors.New("workleasekafka: key not parked")
	// ErrCommitRefused is reported (see WithErrorFunc) for a commit that
	// the Consumer's check refused to send: it would have passed an
	// unfinished record, or gone back. It means a bug; the partition is
	// committed again, correctly or not at all, at the next commit.
	ErrCommitRefused = errors.New("workleasekafka: commit refused")
	// ErrClosed is returned by Run once Close has been called, and by Run
	// called a second time.
	ErrClosed = errors.New("workleasekafka: consumer closed")
)
