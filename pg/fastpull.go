package pg

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/worklease/worklease"
)

// The pull queue's busiest calls, a claim and the completion that ends it,
// are plain statements too, each one round trip, with no server-side
// function: running a function's statements costs the server more than
// the statements themselves. Three things keep them right and fast.
//
// A claim locks the ready domains it takes (skipping those another call
// holds) and reads their backlogs' heads and payloads in the same
// statement, whose snapshot comes from before the locks. So it grants only
// domains whose row is still the version in that snapshot: it updates each
// row by its ctid, which the row's latest version does not share if a
// call changed the row since, and such a row is skipped, as one another
// call holds is. Every call that changes a domain's backlog or payloads
// writes the domain's row in the same transaction, so for the domains a
// claim grants, what the snapshot holds of their backlogs is what they
// hold. Completions read nothing but the rows they lock, whose latest
// versions PostgreSQL rechecks after waiting.
//
// Batches lock their domains in the order of their names, as every call
// that locks more than one domain and waits does, so that they never
// deadlock; claims never wait.
//
// PostgreSQL plans a prepared statement again on every run for as long as
// a plan for the actual arguments looks cheaper than a generic one, which
// a count or an array given as a parameter makes it look; planning these
// statements costs more than running them. Such arguments go in through
// sub-selects, (SELECT $1), which no plan looks into, so that the generic
// plan serves from the sixth run on. Every table these statements read is
// reached by its key or by ctid, so the generic plan is right whatever the
// tables' statistics say.

// pullStatements are the pull queue's plain statements of a schema.
type pullStatements struct {
	claim, succeedOne, succeedMany string
}

func newPullStatements(schema string) pullStatements {
	// due is the SQL of whether a lease is due: claims then take it over
	// first, in the schema's claim function.
	due := fmt.Sprintf(`coalesce((SELECT y.lease_expires_at <= %[2]s FROM %[1]s.domains y
		WHERE y.lease_expires_at IS NOT NULL ORDER BY y.lease_expires_at LIMIT 1), false)`, schema, callNow(2))
	return pullStatements{
		// $1 the most domains to claim, $2 now, $3 the lease TTL in
		// microseconds (0: none).
		claim: fmt.Sprintf(`WITH due AS MATERIALIZED (
	SELECT %[3]s AS due
), locked AS MATERIALIZED (
	SELECT d.ctid AS tid, d.domain FROM %[1]s.domains d
	WHERE d.ready_at <= %[2]s AND NOT (SELECT due FROM due)
	ORDER BY d.priority DESC, d.ready_at LIMIT (SELECT $1::int) FOR UPDATE SKIP LOCKED
), r AS MATERIALIZED (
	SELECT l.*, row_number() OVER () AS rank FROM locked l
), g AS (
	UPDATE %[1]s.domains x
	SET fence = x.fence + 1, lease_off = b.off, lease_attempts = coalesce(b.carried_attempts, 0) + 1,
		lease_retries = coalesce(b.carried_retries, 0), lease_acquired_at = coalesce(b.carried_acquired_at, %[2]s),
		lease_expires_at = %[2]s + CASE WHEN $3::bigint = 0 THEN NULL ELSE $3::bigint * interval '1 microsecond' END,
		queued = x.queued - 1, ready_at = NULL, lease_payload = p.payload IS NOT NULL, counts[1] = x.counts[1] + 1
	FROM r
	CROSS JOIN LATERAL (SELECT y.ctid AS btid, y.off, y.carried_attempts, y.carried_retries, y.carried_acquired_at
		FROM %[1]s.backlog y WHERE y.domain = r.domain ORDER BY y.pos LIMIT 1) b
	LEFT JOIN LATERAL (SELECT p.payload FROM %[1]s.payloads p WHERE p.domain = r.domain AND p.off = b.off LIMIT 1) p ON true
	WHERE x.ctid = ANY (ARRAY(SELECT tid FROM r)) AND x.ctid = r.tid
	RETURNING x.domain, x.lease_off, p.payload, x.fence, x.serial, x.lease_attempts, x.lease_expires_at, b.btid, r.rank
), taken AS (
	DELETE FROM %[1]s.backlog y WHERE y.ctid = ANY (ARRAY(SELECT btid FROM g))
)
SELECT d.due, g.domain, g.lease_off, g.payload, g.fence, g.serial, g.lease_attempts, g.lease_expires_at, %[2]s
FROM due d LEFT JOIN g ON true
ORDER BY g.rank`, schema, callNow(2), due),

		// $1 domain, $2 fence, $3 serial, $4 whether the token's instance
		// is the database's, $5 now, $6 monotonic offsets. A domain left
		// with offsets queued becomes ready; if none other is, waiting
		// claims are notified.
		succeedOne: fmt.Sprintf(`WITH u AS (
	UPDATE %[1]s.domains x
	SET %[3]s, ready_at = CASE WHEN x.queued > 0 AND NOT x.paused THEN %[2]s END
	WHERE x.domain = $1 AND x.fence = $2::bigint AND x.serial = $3::bigint AND $4::bool AND x.lease_off IS NOT NULL
		AND (x.lease_expires_at IS NULL OR %[2]s < x.lease_expires_at)
	RETURNING x.domain, x.ended_off, x.ended_attempts, x.ended_payload, x.fence, x.ready_at IS NOT NULL AS ready
), gone AS (
	DELETE FROM %[1]s.payloads y USING u WHERE u.ended_payload AND y.domain = $1 AND y.off = u.ended_off
)
SELECT u.domain, u.ended_off, u.ended_attempts, u.fence, %[2]s,
	CASE WHEN u.ready AND NOT EXISTS (SELECT FROM %[1]s.domains x WHERE x.ready_at <= %[2]s AND x.domain <> $1)
		THEN (SELECT true FROM pg_notify('%[4]s', '%[1]s')) END
FROM u`, schema, callNow(5), endLease(6), readyChannel),

		// $1 domains, $2 fences, $3 serials (a token for each domain), $4
		// whether the tokens' instance is the database's, $5 now, $6
		// monotonic offsets.
		succeedMany: fmt.Sprintf(`WITH t AS MATERIALIZED (
	SELECT * FROM unnest((SELECT $1::bytea[]), (SELECT $2::bigint[]), (SELECT $3::bigint[])) AS t(dom, fence, serial)
), locked AS MATERIALIZED (
	SELECT x.domain FROM %[1]s.domains x WHERE x.domain = ANY ((SELECT $1::bytea[])::bytea[]) ORDER BY x.domain FOR UPDATE
), u AS (
	UPDATE %[1]s.domains x
	SET %[3]s, ready_at = CASE WHEN x.queued > 0 AND NOT x.paused THEN %[2]s END
	FROM t
	WHERE x.domain = ANY (ARRAY(SELECT domain FROM locked)) AND x.domain = t.dom
		AND x.fence = t.fence AND x.serial = t.serial AND $4::bool AND x.lease_off IS NOT NULL
		AND (x.lease_expires_at IS NULL OR %[2]s < x.lease_expires_at)
	RETURNING x.domain, x.ended_off, x.ended_attempts, x.ended_payload, x.fence, x.ready_at IS NOT NULL AS ready
), gone AS (
	DELETE FROM %[1]s.payloads y USING u WHERE u.ended_payload AND y.domain = u.domain AND y.off = u.ended_off
), notified AS (
	SELECT FROM pg_notify('%[4]s', '%[1]s') WHERE EXISTS (SELECT FROM u WHERE u.ready)
		AND NOT EXISTS (SELECT FROM %[1]s.domains x WHERE x.ready_at <= %[2]s AND x.domain <> ALL ((SELECT $1::bytea[])::bytea[]))
)
SELECT u.domain, u.ended_off, u.ended_attempts, u.fence, %[2]s, n.count > 0
FROM u LEFT JOIN (SELECT count(*) FROM notified) n ON true`, schema, callNow(5), endLease(6), readyChannel),
	}
}

// claimFast leases the heads of up to n ready domains in one statement, if
// no lease is due; due reports that one is, and then it changed nothing.
func (m *Manager) claimFast(ctx context.Context, conn *pgxpool.Conn, n int) (out []Claim, due bool, err error) {
	rows, err := conn.Query(ctx, m.pull.claim, n, m.now(), m.ttl())
	if err != nil {
		return nil, false, callError("Claim", err)
	}
	defer rows.Close()
	for rows.Next() {
		var d []byte
		var c Claim
		var off, fence, serial *int64 // NULL in the one row of a claim that granted nothing
		var attempts *int32
		var expires *time.Time
		var at time.Time
		if err := rows.Scan(&due, &d, &off, &c.Payload, &fence, &serial, &attempts, &expires, &at); err != nil {
			return nil, false, callError("Claim", err)
		}
		if d == nil {
			continue
		}
		c.Domain, c.Offset, c.Token, c.Attempt, c.ExpiresAt = string(d), *off, m.token(*fence, *serial), int(*attempts), timeOf(expires)
		if m.cfg.Observer != nil {
			a := answer{serial: *serial, at: &at}
			a.event(1, *off, *attempts, *fence)
			m.report(c.Domain, &a, nil, worklease.Token{}, nil)
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, false, callError("Claim", err)
	}
	return out, due, nil
}

// An ended lease is one that SucceedMany ended at once.
type ended struct {
	domain     []byte
	off, fence int64
	attempts   int32
	at         time.Time
}

// succeedBatch ends the leases of the tokens (fences, serials) on domains,
// one token for each domain, that it can end at once, in one statement,
// and returns them.
func (m *Manager) succeedBatch(ctx context.Context, domains [][]byte, fences, serials []int64) ([]ended, error) {
	c, err := m.conn(ctx, "SucceedMany")
	if err != nil {
		return nil, err
	}
	defer c.Release()
	var rows pgx.Rows
	if len(domains) == 1 {
		rows, err = c.Query(ctx, m.pull.succeedOne, domains[0], fences[0], serials[0], true, m.now(), m.cfg.MonotonicOffsets)
	} else {
		rows, err = c.Query(ctx, m.pull.succeedMany, domains, fences, serials, true, m.now(), m.cfg.MonotonicOffsets)
	}
	if err != nil {
		return nil, callError("SucceedMany", err)
	}
	defer rows.Close()
	var all []ended
	for rows.Next() {
		var e ended
		var notified *bool // whether the call notified waiting claims (see WaitClaim)
		if err := rows.Scan(&e.domain, &e.off, &e.attempts, &e.fence, &e.at, &notified); err != nil {
			return nil, callError("SucceedMany", err)
		}
		all = append(all, e)
	}
	if err := rows.Err(); err != nil {
		return nil, callError("SucceedMany", err)
	}
	return all, nil
}
