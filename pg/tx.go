package pg

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/worklease/worklease"
)

// Enqueuing in the caller's transaction: a service that writes its own
// rows and enqueues the work that follows from them makes both happen, or
// neither. Each call that stores work has a form that ends in Tx and takes
// the caller's pgx.Tx after the context, with the same arguments and
// results otherwise: it runs the same statement in that transaction,
// which the caller commits or rolls back. Such a call:
//
//   - stores nothing unless tx commits: until then no other session sees
//     what it stored, nor a domain it created;
//   - wakes the waiting claims of every process (WaitClaim) when tx
//     commits: the notification it sends goes out with the commit, and
//     not at all if tx rolls back;
//   - locks the rows of the domains it names, as every call does, but
//     until tx ends rather than for one statement: meanwhile every other
//     call on those domains, from any process, waits for tx (a Succeed of
//     the lease in flight, another Enqueue, Inspect), except claims, which
//     skip them, so their queued offsets wait too. Keep tx short: enqueue
//     at its end, just before committing. A long transaction also holds
//     back vacuum, which slows every claim (see Claim);
//   - checks its input first, as the other calls do: an invalid one is
//     refused with the same typed error, before anything reaches the
//     database, and tx is left as it was. If the database fails the call,
//     tx is aborted, as after any failed statement, and must be rolled
//     back: PostgreSQL may fail one transaction to break a deadlock when
//     transactions lock domains in different orders (each call locks its
//     own in the order of their names), which the caller then tries
//     again. The outcome is never unknown: what a failed call did goes
//     with tx;
//   - is not told to the observer (WithObserver): the transition takes
//     effect when tx commits, which the Manager does not see. Stats counts
//     it from then on.

// runner runs a call's statement: a connection of the pool, or the
// caller's transaction.
type runner interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// EnqueueTx is Enqueue in tx, the caller's transaction (see the notes on
// the Tx calls above): domain's row is locked until tx ends, and the
// offset is stored if and only if tx commits, for Claim to lease in its
// turn. Its status is as of tx: it stands only if tx commits.
func (m *Manager) EnqueueTx(ctx context.Context, tx pgx.Tx, domain string, offset int64, payload []byte) (worklease.AcquireStatus, error) {
	const op = "EnqueueTx"
	if err := m.checkEnqueue(op, domain, offset, payload); err != nil {
		return 0, err
	}
	a, err := m.callIn(ctx, tx, op, m.sql.enqueue, []byte(domain), offset, payloadArg(payload))
	if err != nil {
		return 0, err
	}
	return m.enqueued(op, domain, &a, false)
}

// EnqueueManyTx is EnqueueMany in tx, the caller's transaction (see the
// notes on the Tx calls above): the rows of the items' domains are locked
// until tx ends, and the items are stored if and only if tx commits. The
// statuses, in the order of items, stand only if tx commits. An invalid
// item is refused, as EnqueueMany refuses it, before the batch reaches
// the database.
func (m *Manager) EnqueueManyTx(ctx context.Context, tx pgx.Tx, items []Item) ([]worklease.AcquireStatus, error) {
	const op = "EnqueueManyTx"
	b, err := m.argsOf(op, items)
	if err != nil || len(items) == 0 {
		return nil, err
	}
	all, err := m.enqueueBatch(ctx, tx, b, false) // a Tx call reports no events
	if err != nil {
		return nil, dbError(op, err)
	}
	return b.statuses(op, all)
}

// callIn runs statement, a call of a function that returns an answer, as
// call does, in tx, the caller's transaction.
func (m *Manager) callIn(ctx context.Context, tx pgx.Tx, op, statement string, args ...any) (answer, error) {
	var a answer
	args = append(append(args, m.now()), m.policy()...)
	if err := tx.QueryRow(ctx, statement, args...).Scan(a.dest()...); err != nil {
		return answer{}, dbError(op, err)
	}
	return a, nil
}
