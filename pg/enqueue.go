package pg

import (
	"context"
	"fmt"

	"github.com/worklease/worklease"
)

// Enqueue stores offset at the back of domain's backlog (the front, with
// LIFO ordering) with payload, for Claim to lease in its turn. It never
// grants a lease itself, even on an idle domain. The status is Enqueued,
// also for an offset queued already, which is stored once, with the
// payload it was first stored with; AlreadyAcquired for the offset in
// flight; AlreadyProcessed or AlreadyFailed for a terminal one, whose
// answer does not change (until Redrive, or Forget), so that (domain,
// offset) is an idempotency key.
// A nil payload stores none. The payload is deleted when the offset
// succeeds.
func (m *Manager) Enqueue(ctx context.Context, domain string, offset int64, payload []byte) (worklease.AcquireStatus, error) {
	if err := m.check("Enqueue", domain, offset); err != nil {
		return 0, err
	}
	a, err := m.call(ctx, "Enqueue", m.sql.enqueue, []byte(domain), offset, payloadArg(payload))
	if err != nil {
		return 0, err
	}
	m.report(domain, &a, nil, worklease.Token{}, nil)
	return worklease.AcquireStatus(a.status), nil
}

// An Item is an offset of a domain to enqueue, with its payload.
type Item struct {
	Domain  string
	Offset  int64
	Payload []byte // nil for none
}

// EnqueueMany is Enqueue for each item, in one round trip and one
// transaction: all are stored, or none. The statuses are in the order of
// items. A domain's items are queued in the order given. If an item is
// invalid (an empty domain, a negative offset), EnqueueMany returns its
// error and stores nothing.
func (m *Manager) EnqueueMany(ctx context.Context, items []Item) ([]worklease.AcquireStatus, error) {
	if m.closed.Load() {
		return nil, fmt.Errorf("pg: EnqueueMany: %w", worklease.ErrClosed)
	}
	domains, offsets, payloads := make([][]byte, len(items)), make([]int64, len(items)), make([][]byte, len(items))
	for i, it := range items {
		if err := m.check("EnqueueMany", it.Domain, it.Offset); err != nil {
			return nil, err
		}
		domains[i], offsets[i], payloads[i] = []byte(it.Domain), it.Offset, it.Payload
	}
	if len(items) == 0 {
		return nil, nil
	}
	c, err := m.conn(ctx, "EnqueueMany")
	if err != nil {
		return nil, err
	}
	defer c.release()
	all, err := retryDeadlocked(func() ([]enqueued, error) {
		return m.enqueueBatch(ctx, c, domains, offsets, payloads)
	})
	if err != nil {
		return nil, err
	}
	if len(all) != len(items) {
		return nil, fmt.Errorf("pg: EnqueueMany: %d answers for %d items", len(all), len(items))
	}
	out := make([]worklease.AcquireStatus, len(items))
	for _, e := range all {
		it := items[e.i-1]
		m.report(it.Domain, &e.a, nil, worklease.Token{}, nil)
		out[e.i-1] = worklease.AcquireStatus(e.a.status)
	}
	return out, nil
}

// An enqueued item is an answer of enqueue_many, for the i-th item, from 1.
type enqueued struct {
	i int32
	a answer
}

// enqueueBatch runs EnqueueMany's statement on c.
func (m *Manager) enqueueBatch(ctx context.Context, c *callConn, domains [][]byte, offsets []int64, payloads [][]byte) ([]enqueued, error) {
	rows, err := c.Query(ctx, m.sql.enqueueMany, append([]any{domains, offsets, payloads, m.now()}, m.policy()...)...)
	if err != nil {
		return nil, c.fail("EnqueueMany", err)
	}
	defer rows.Close()
	var all []enqueued
	for rows.Next() {
		var e enqueued
		if err := rows.Scan(append([]any{&e.i}, e.a.dest()...)...); err != nil {
			return nil, c.fail("EnqueueMany", err)
		}
		all = append(all, e)
	}
	if err := rows.Err(); err != nil {
		return nil, c.fail("EnqueueMany", err)
	}
	return all, nil
}

// payloadArg returns payload as a statement's argument: NULL for nil.
func payloadArg(payload []byte) any {
	if payload == nil {
		return nil
	}
	return payload
}
