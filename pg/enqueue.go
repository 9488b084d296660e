package pg

import (
	"context"
	"fmt"

	"github.com/worklease/worklease"
)

// Enqueue stores offset at the back of domain's backlog (the front, with
// LIFO ordering) with payload, for Claim to lease in its turn. It never
// grants a lease itself, even on an idle domain. The status is Enqueued
// for an offset it stored; for one the domain holds already it stores
// nothing and says which state it is in: AlreadyQueued, AlreadyAcquired
// for the offset in flight, AlreadyProcessed or AlreadyFailed for a
// terminal one, whose answer does not change (until Redrive, or Forget),
// so that (domain, offset) is an idempotency key. If that offset, queued,
// in flight or failed, was stored with another payload (or one without a
// payload and the other with one), Enqueue returns an error matching
// worklease.ErrPayloadMismatch instead, and stores nothing. A nil payload
// stores none; one longer than the limit (worklease.WithMaxPayload) is
// refused with worklease.ErrPayloadTooLarge before it reaches the
// database. The payload is deleted when the offset succeeds.
func (m *Manager) Enqueue(ctx context.Context, domain string, offset int64, payload []byte) (worklease.AcquireStatus, error) {
	const op = "Enqueue"
	if err := m.checkEnqueue(op, domain, offset, payload); err != nil {
		return 0, err
	}
	a, err := m.call(ctx, op, m.sql.enqueue, []byte(domain), offset, payloadArg(payload))
	if err != nil {
		return 0, err
	}
	return m.enqueued(op, domain, &a, true)
}

// An Item is an offset of a domain to enqueue, with its payload.
type Item struct {
	Domain  string
	Offset  int64
	Payload []byte // nil for none
}

// EnqueueMany is Enqueue for each item, in one round trip and one
// transaction: all are stored, or none. The statuses are in the order of
// items, each as Enqueue answers it: an item that repeats one given earlier
// in the batch is AlreadyQueued. A domain's items are queued in the order
// given. If an item is invalid (an empty domain, a negative offset, a
// payload above the limit), EnqueueMany returns its error and stores
// nothing; so it does, with an error matching
// worklease.ErrPayloadMismatch, if an item's offset is held with another
// payload (or given earlier in the batch with another).
func (m *Manager) EnqueueMany(ctx context.Context, items []Item) ([]worklease.AcquireStatus, error) {
	const op = "EnqueueMany"
	b, err := m.argsOf(op, items)
	if err != nil || len(items) == 0 {
		return nil, err
	}
	c, err := m.conn(ctx, op)
	if err != nil {
		return nil, err
	}
	defer c.release()
	events := m.cfg.Observer != nil
	all, err := retryDeadlocked(func() ([]enqueued, error) {
		all, err := m.enqueueBatch(ctx, c, b, events)
		if err != nil {
			return nil, c.fail(op, err)
		}
		return all, nil
	})
	if err != nil {
		return nil, err
	}
	out, err := b.statuses(op, all)
	if err != nil {
		return nil, err
	}
	if events {
		for _, e := range all {
			m.report(items[e.i-1].Domain, &e.a, nil, worklease.Token{}, nil)
		}
	}
	return out, nil
}

// enqueueArgs are EnqueueMany's items as the arguments of its statement.
type enqueueArgs struct {
	domains  [][]byte
	offsets  []int64
	payloads [][]byte
}

// argsOf returns the arguments of items for call op, or the error of the
// first invalid item.
func (m *Manager) argsOf(op string, items []Item) (enqueueArgs, error) {
	if m.closed.Load() {
		return enqueueArgs{}, fmt.Errorf("pg: %s: %w", op, worklease.ErrClosed)
	}
	b := enqueueArgs{make([][]byte, len(items)), make([]int64, len(items)), make([][]byte, len(items))}
	for i, it := range items {
		if err := m.checkEnqueue(op, it.Domain, it.Offset, it.Payload); err != nil {
			return enqueueArgs{}, err
		}
		b.domains[i], b.offsets[i], b.payloads[i] = []byte(it.Domain), it.Offset, it.Payload
	}
	return b, nil
}

// statuses returns the status of each item of b, by its index, from all,
// the answers of its statement.
func (b *enqueueArgs) statuses(op string, all []enqueued) ([]worklease.AcquireStatus, error) {
	for _, e := range all { // a refused batch stored nothing
		if e.a.err != 0 && e.i >= 1 && int(e.i) <= len(b.domains) {
			return nil, domainError(op, string(b.domains[e.i-1]), fmt.Errorf("item %d: %w", e.i-1, errorOf(e.a.err)))
		}
	}
	if len(all) != len(b.domains) {
		return nil, fmt.Errorf("pg: %s: %d answers for %d items", op, len(all), len(b.domains))
	}
	out := make([]worklease.AcquireStatus, len(all))
	for _, e := range all {
		out[e.i-1] = worklease.AcquireStatus(e.a.status)
	}
	return out, nil
}

// An enqueued item is an answer of enqueue_many, for the i-th item, from 1.
type enqueued struct {
	i int32
	a answer
}

// enqueueBatch runs EnqueueMany's statement for b on q, and returns the
// database's error as it is. Each answer is whole if events is set, and
// otherwise only its status and error.
func (m *Manager) enqueueBatch(ctx context.Context, q runner, b enqueueArgs, events bool) ([]enqueued, error) {
	statement := m.sql.enqueueManyStatuses
	if events {
		statement = m.sql.enqueueMany
	}
	rows, err := q.Query(ctx, statement, append([]any{b.domains, b.offsets, b.payloads, m.now()}, m.policy()...)...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	all := make([]enqueued, 0, len(b.domains))
	for rows.Next() {
		all = append(all, enqueued{})
		e := &all[len(all)-1]
		var dest []any
		if events {
			dest = append([]any{&e.i}, e.a.dest()...)
		} else {
			dest = []any{&e.i, &e.a.status, &e.a.err}
		}
		if err := rows.Scan(dest...); err != nil {
			return nil, err
		}
	}
	return all, rows.Err()
}

// payloadArg returns payload as a statement's argument: NULL for nil.
func payloadArg(payload []byte) any {
	if payload == nil {
		return nil
	}
	return payload
}
