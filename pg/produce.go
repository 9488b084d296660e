package pg

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/worklease/worklease"
)

// The producers' calls beside Enqueue: Append, which has the database
// assign the domain's next offset, with an idempotency key; and Cancel.
// Each checks its input before anything reaches the database, and the
// payload's length against the Manager's limit (worklease.WithMaxPayload),
// so that a call refused stores nothing.

// checkPayload returns the error of call op on domain for a payload above
// the Manager's limit.
func (m *Manager) checkPayload(op, domain string, payload []byte) error {
	if len(payload) > m.cfg.MaxPayload {
		return domainError(op, domain, fmt.Errorf("%w: %d bytes, more than %d", worklease.ErrPayloadTooLarge, len(payload), m.cfg.MaxPayload))
	}
	return nil
}

// Append is worklease.Manager.Append: it stores payload under the domain's
// next offset, which the database assigns and Append returns: one more
// than the highest offset the domain holds, in any state (0 for none).
// Appends on one domain take the domain's row lock in turn, so the offsets
// are unique across every process, in the order the calls commit.
//
// With opts.Key, an Append repeated on the domain within the key window
// (worklease.WithKeyWindow) stores nothing and returns the first one's
// offset with its state now, or an error matching
// worklease.ErrPayloadMismatch if its payload is another. Keys are rows of
// the schema's append_keys table, which the Manager prunes as it vacuums
// (see the package documentation for their cost).
func (m *Manager) Append(ctx context.Context, domain string, payload []byte, opts worklease.AppendOptions) (worklease.AppendResult, error) {
	const op = "Append"
	if err := m.checkAppend(op, domain, payload, opts); err != nil {
		return worklease.AppendResult{}, err
	}
	a, err := m.call(ctx, op, m.sql.append, m.appendArgs(domain, payload, opts)...)
	if err != nil {
		return worklease.AppendResult{}, err
	}
	res, err := m.appended(op, domain, &a, true)
	if err == nil && opts.Key != "" && res.Status == worklease.Enqueued {
		m.noteKey()
	}
	return res, err
}

// AppendTx is Append in tx, the caller's transaction (see the notes on
// the Tx calls in tx.go): the domain's row is locked until tx ends, so
// that every other Append on the domain waits for tx, and the offset is
// assigned, and its key kept, if and only if tx commits. The result
// stands only if tx commits.
func (m *Manager) AppendTx(ctx context.Context, tx pgx.Tx, domain string, payload []byte, opts worklease.AppendOptions) (worklease.AppendResult, error) {
	const op = "AppendTx"
	if err := m.checkAppend(op, domain, payload, opts); err != nil {
		return worklease.AppendResult{}, err
	}
	a, err := m.callIn(ctx, tx, op, m.sql.append, m.appendArgs(domain, payload, opts)...)
	if err != nil {
		return worklease.AppendResult{}, err
	}
	return m.appended(op, domain, &a, false)
}

// checkAppend checks Append's input, as the in-memory Manager does: the
// domain, then the payload's length and the key's.
func (m *Manager) checkAppend(op, domain string, payload []byte, opts worklease.AppendOptions) error {
	if err := m.check(op, domain, 0); err != nil {
		return err
	}
	if err := m.checkPayload(op, domain, payload); err != nil {
		return err
	}
	if len(opts.Key) > worklease.MaxKeyLen {
		return domainError(op, domain, fmt.Errorf("%w: %d bytes, more than %d", worklease.ErrInvalidKey, len(opts.Key), worklease.MaxKeyLen))
	}
	return nil
}

// appendArgs returns the arguments of the append function.
func (m *Manager) appendArgs(domain string, payload []byte, opts worklease.AppendOptions) []any {
	var key any // NULL: none
	if opts.Key != "" {
		key = []byte(opts.Key)
	}
	return []any{[]byte(domain), payloadArg(payload), key, m.cfg.KeyWindow, notBeforeArg(opts.NotBefore)}
}

// appended returns Append's result from its answer, and reports its
// events if report is set.
func (m *Manager) appended(op, domain string, a *answer, report bool) (worklease.AppendResult, error) {
	var err error
	if a.err != 0 {
		err = domainError(op, domain, errorOf(a.err))
	}
	if report {
		m.report(domain, a, nil, worklease.Token{}, nil)
	}
	if err != nil {
		return worklease.AppendResult{}, err
	}
	if a.hint == nil {
		return worklease.AppendResult{}, fmt.Errorf("pg: %s: the database assigned no offset", op)
	}
	return worklease.AppendResult{Offset: *a.hint, Status: worklease.AcquireStatus(a.status)}, nil
}

// Cancel is worklease.Manager.Cancel: offset, queued or scheduled (or, with
// inFlight, the one in flight), leaves the domain's line and never runs.
// It counts as processed, not failed: no dead letter, its payload deleted,
// an event of its own (worklease.EventCancelled) and Stats.Cancelled. A
// lease on it is revoked: its holder's later calls are refused with
// worklease.ErrLeaseRevoked. It returns the domain's head after it.
// Cancel refuses an offset in flight without inFlight
// (worklease.ErrInFlight), a processed one (worklease.ErrAlreadyProcessed)
// and one neither queued nor in flight, a dead letter included
// (worklease.ErrNotQueued), changing nothing.
func (m *Manager) Cancel(ctx context.Context, domain string, offset int64, inFlight bool) (worklease.Head, error) {
	const op = "Cancel"
	if err := m.check(op, domain, offset); err != nil {
		return worklease.Head{}, err
	}
	a, err := m.call(ctx, op, m.sql.cancel, []byte(domain), offset, inFlight)
	if err != nil {
		return worklease.Head{}, err
	}
	if err := m.refused(op, domain, &a, nil, worklease.Token{}); err != nil {
		return worklease.Head{}, err
	}
	return headOf(&a), nil
}

// EnqueueAt is worklease.Manager.EnqueueAt: Enqueue of an offset that is
// not granted before notBefore, by any call. While it is the head of its
// domain's backlog the domain grants nothing, and the offsets behind it
// wait: a claim that finds the domain ready puts it off until notBefore
// (WaitClaim's poll finds it then), TryAcquire queues the offset it is
// asked for, and SucceedNext, FailNext and ClaimNext grant nothing next.
// A notBefore that is not after the call's time (the database's clock, or
// WithClock's) is no schedule. An offset the domain holds already keeps
// its payload and its time, as Enqueue says.
func (m *Manager) EnqueueAt(ctx context.Context, domain string, offset int64, payload []byte, notBefore time.Time) (worklease.AcquireStatus, error) {
	const op = "EnqueueAt"
	if err := m.checkEnqueue(op, domain, offset, payload); err != nil {
		return 0, err
	}
	a, err := m.call(ctx, op, m.sql.enqueueAt, []byte(domain), offset, payloadArg(payload), notBeforeArg(notBefore))
	if err != nil {
		return 0, err
	}
	return m.enqueued(op, domain, &a, true)
}

// checkEnqueue checks an enqueue's input: its domain and offset, as
// TryAcquire does, then the payload's length.
func (m *Manager) checkEnqueue(op, domain string, offset int64, payload []byte) error {
	if err := m.check(op, domain, offset); err != nil {
		return err
	}
	return m.checkPayload(op, domain, payload)
}

// enqueued returns the status of an enqueue from its answer, or its
// error, and reports its events if report is set.
func (m *Manager) enqueued(op, domain string, a *answer, report bool) (worklease.AcquireStatus, error) {
	if report {
		m.report(domain, a, nil, worklease.Token{}, nil)
	}
	if a.err != 0 {
		return 0, domainError(op, domain, errorOf(a.err))
	}
	return worklease.AcquireStatus(a.status), nil
}

// notBeforeArg returns a schedule as a statement's argument: NULL for
// none.
func notBeforeArg(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t
}
