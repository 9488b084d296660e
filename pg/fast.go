package pg

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/worklease/worklease"
)

// The fast statements make the two calls of a usual cycle, a grant on an
// idle domain and the Succeed that ends it, each as one UPDATE of the
// domain's row, with every condition of the shortcut in its WHERE clause.
// A plain UPDATE costs the server a fraction of a function call, and
// PostgreSQL rechecks its WHERE clause on the row's latest version after
// waiting for another call's lock, so each condition is read from the row
// itself (its queued and failed counts, its processed offsets), never
// through a subquery, which would read an older snapshot. When the
// shortcut does not apply the UPDATE changes nothing, and the call's
// function decides, in a second statement.

// fastStatements are the fast statements of a schema: those for domains of
// at most keyBytes bytes, which find a domain's row by the domain alone
// (see shortKeyIs), and those for longer domains, which take its key too.
type fastStatements struct {
	acquire, succeed         string
	acquireLong, succeedLong string
}

// endLease is the SQL that ends a domain's lease as succeeded, for an
// UPDATE's SET list: the lease's offset becomes processed (in a run from 0,
// with monotonic offsets, which $n says), and the row keeps what the lease
// was in its ended_ columns, which RETURNING reads (PostgreSQL 15 returns
// only new values).
func endLease(n int) string {
	return fmt.Sprintf(`lease_off = NULL, lease_attempts = 0, lease_retries = 0, lease_acquired_at = NULL, lease_expires_at = NULL,
	ended_off = x.lease_off, ended_attempts = x.lease_attempts, ended_payload = x.lease_payload, lease_payload = false,
	processed = CASE WHEN $%d::bool
		THEN nummultirange(numrange(0, greatest(coalesce(upper(x.processed), 0), x.lease_off::numeric + 1)))
		ELSE x.processed + nummultirange(numrange(x.lease_off, x.lease_off::numeric + 1)) END,
	counts[3] = x.counts[3] + 1`, n)
}

// callNow is the SQL of a call's time: the Manager's clock's, $n, or the
// database's.
func callNow(n int) string {
	return fmt.Sprintf("coalesce($%d::timestamptz, statement_timestamp())", n)
}

func newFastStatements(schema string) fastStatements {
	// $1 domain, $2 offset, $3 now, $4 the lease TTL in microseconds (0:
	// none), and for a long domain $5 its key.
	acquire := func(domain string) string {
		return fmt.Sprintf(`UPDATE %[1]s.domains x
SET fence = greatest(x.fence, %[1]s.fence_floor()) + 1, lease_off = $2::bigint, lease_attempts = 1, lease_retries = 0,
	lease_acquired_at = %[2]s,
	lease_expires_at = %[2]s + CASE WHEN $4::bigint = 0 THEN NULL ELSE $4::bigint * interval '1 microsecond' END,
	lease_payload = false, counts[1] = x.counts[1] + 1
WHERE %[3]s AND NOT x.forgotten AND x.lease_off IS NULL AND NOT x.paused
	AND x.queued = 0 AND x.failed = 0 AND NOT x.processed @> $2::bigint::numeric
RETURNING x.fence, x.serial, x.lease_acquired_at, x.lease_expires_at`, schema, callNow(3), domain)
	}
	// $1 domain, $2 fence, $3 serial, $4 whether the token's instance is
	// the database's, $5 now, $6 monotonic offsets, and for a long domain
	// $7 its key.
	succeed := func(domain string) string {
		return fmt.Sprintf(`UPDATE %[1]s.domains x
SET %[3]s
WHERE %[4]s AND x.lease_off IS NOT NULL AND $4::bool AND x.serial = $3::bigint AND x.fence = $2::bigint
	AND (x.lease_expires_at IS NULL OR %[2]s < x.lease_expires_at) AND x.queued = 0 AND NOT x.lease_payload
RETURNING x.ended_off, x.ended_attempts, x.fence, x.serial, %[2]s`, schema, callNow(5), endLease(6), domain)
	}
	return fastStatements{
		acquire:     acquire(shortKeyIs("x", "$1")),
		succeed:     succeed(shortKeyIs("x", "$1")),
		acquireLong: acquire(keyIs("x", "$1", "$5")),
		succeedLong: succeed(keyIs("x", "$1", "$7")),
	}
}

// tryAcquireFast grants offset of domain if the domain is known, running
// and idle, has nothing queued or failed (so no payload is stored for
// offset), and offset is not processed. ok
// reports whether it did; if not, nothing changed.
func (m *Manager) tryAcquireFast(ctx context.Context, domain string, offset int64) (a answer, ok bool, err error) {
	var at time.Time
	c, err := m.conn(ctx, "TryAcquire")
	if err != nil {
		return answer{}, false, err
	}
	defer c.release()
	d := []byte(domain)
	stmt, args := m.fast.acquire, []any{d, offset, m.now(), m.ttl()}
	if len(d) > keyBytes {
		stmt, args = m.fast.acquireLong, append(args, key(d))
	}
	err = c.QueryRow(ctx, stmt, args...).Scan(&a.fence, &a.serial, &at, &a.expireAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return answer{}, false, nil
	}
	if err != nil {
		return answer{}, false, c.fail("TryAcquire", err)
	}
	a.status, a.leaseOff, a.attempts, a.acquiredAt, a.at = 1, &offset, 1, &at, &at
	if m.cfg.Observer != nil { // only the observer reads events
		a.event(worklease.EventAcquired, offset, 1, a.fence)
	}
	return a, true, nil
}

// succeedFast ends the lease of tok's holder on domain if it is not due,
// nothing is queued behind it and it has no payload to delete: the usual
// Succeed, whose answer is Done.
// ok reports whether it did; if not, nothing changed.
func (m *Manager) succeedFast(ctx context.Context, op string, holder []any) (a answer, ok bool, err error) {
	var off int64
	var attempts int32
	stmt, args := m.fast.succeed, append(holder[:len(holder):len(holder)], m.now(), m.cfg.MonotonicOffsets)
	if d := holder[0].([]byte); len(d) > keyBytes {
		stmt, args = m.fast.succeedLong, append(args, key(d))
	}
	c, err := m.conn(ctx, op)
	if err != nil {
		return answer{}, false, err
	}
	defer c.release()
	err = c.QueryRow(ctx, stmt, args...).Scan(&off, &attempts, &a.fence, &a.serial, &a.at)
	if errors.Is(err, pgx.ErrNoRows) {
		return answer{}, false, nil
	}
	if err != nil {
		return answer{}, false, c.fail(op, err)
	}
	a.status = 1
	if m.cfg.Observer != nil {
		a.event(worklease.EventProcessed, off, attempts, a.fence)
	}
	return a, true, nil
}

// event sets a's events to one: kind, on offset, at attempt, under fence.
func (a *answer) event(kind worklease.EventKind, offset int64, attempt int32, fence int64) {
	a.evKinds, a.evOffs, a.evAttempts, a.evFences, a.evWhys =
		[]int16{int16(kind)}, []int64{offset}, []int32{attempt}, []int64{fence}, []int16{0}
}
