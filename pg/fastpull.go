package pg

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

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
// call holds is (a claim that skipped every domain it found looks again). Every call that changes a domain's backlog or payloads
// writes the domain's row in the same transaction, so for the domains a
// claim grants, what the snapshot holds of their backlogs is what they
// hold. Completions read nothing but the rows they lock, whose latest
// versions PostgreSQL rechecks after waiting.
//
// Batches lock their domains in the order of their names, as every call
// that locks more than one domain and waits does. A claim waits only when a
// row it locks was changed at that moment, for the change's transaction,
// holding the rows it locked before in the order they were ready: the rare
// deadlock that makes, PostgreSQL breaks by cancelling one transaction,
// which the calls that lock several domains then run again.
//
// PostgreSQL plans a prepared statement again on every run for as long as
// a plan for the actual arguments looks cheaper than a generic one, which
// a count or an array given as a parameter makes it look; planning these
// statements costs more than running them. Such arguments go in through
// sub-selects, (SELECT $1), which no plan looks into, so that the generic
// plan serves from the sixth run on. Every table these statements read is
// reached by its key or by ctid, so the generic plan is right whatever the
// tables' statistics say.

// headColumns are the columns of a backlog's head (see backlogHead) that a
// claim and ClaimNext read to grant it.
const headColumns = "y.ctid AS btid, y.off, y.carried_attempts, y.carried_retries, y.carried_acquired_at, y.not_before"

// onlyAppended is the SQL of whether the backlog of x, a domain's row as
// ClaimNext locked it, differs from the backlog of t, the same row as the
// statement's snapshot had it, only by offsets queued at its back. Every
// call that queues an offset moves back_pos up or front_pos down (LIFO,
// redrives and retries queue at the front), and every call that takes
// one out (a grant, Cancel, Kill) counts queued down: so with front_pos
// unchanged and queued up by as much as back_pos, nothing left and
// nothing came before what was there, and t's head is x's. A backlog's
// rows are otherwise never changed but for the schedule of an offset
// queued in the same transaction, at the back then, or at the front.
// ClaimNext checks it only for a domain whose lease the token still
// holds, which no other call can grant, Forget or claim meanwhile.
const onlyAppended = "x.front_pos = t.front_was AND x.back_pos - t.back_was = x.queued - t.queued_was"

// pullStatements are the pull queue's plain statements of a schema.
type pullStatements struct {
	claim, succeedOne, succeedOneLong, succeedMany, claimNext, repeatNext string
	vacuum, mayVacuum, idleTables, pruneKeys                              string // see vacuum.go
}

func newPullStatements(schema string) pullStatements {
	// due is the SQL of whether a lease is due: claims then take it over
	// first, in the schema's claim function.
	due := fmt.Sprintf(`coalesce((SELECT y.lease_expires_at <= %[2]s FROM %[1]s.domains y
		WHERE y.lease_expires_at IS NOT NULL ORDER BY y.lease_expires_at LIMIT 1), false)`, schema, callNow(2))
	// othersReady is the SQL of whether a domain other than those of $1 is
	// ready at $5, read through the index of ready domains (a plan that
	// expected one soon might read the whole table) from its oldest end,
	// where the entries of the domains claimed since the last vacuum lie
	// dead (see vacuum.go). From the newest end, it would read past every
	// domain of the lowest priority waiting out a retry delay first.
	othersReady := fmt.Sprintf(`(SELECT true FROM %[1]s.domains x WHERE x.ready_at <= %[2]s AND x.domain <> ALL (%[3]s)
		ORDER BY x.priority DESC, x.ready_at LIMIT 1) IS NOT NULL`, schema, callNow(5), "(SELECT $1::bytea[])::bytea[]")
	// tokens is the SQL of a batch's tokens, $1 to $3, a row each, with
	// its domain's key from the argument keys, which the caller makes with
	// key, as the single statements take theirs (see keyIs): _key of every
	// domain would be an expression evaluated for each row of every run.
	tokens := func(keys string) string {
		return fmt.Sprintf("SELECT t.dom, t.key, t.fence, t.serial FROM unnest((SELECT $1::bytea[]), (SELECT %s::bytea[]), "+
			"(SELECT $2::bigint[]), (SELECT $3::bigint[])) AS t(dom, key, fence, serial)", keys)
	}
	// locked is the SQL of the batch's domains, $1, with their keys in the
	// argument keys, locked in the order of their names. A batch's UPDATE
	// reads it in a one-time filter, so that every lock is taken before the
	// first row is updated. A row whose key is at most keyBytes long is of
	// the domain that is its key, which is the batch's if the key is one
	// of the batch's keys (no longer domain's key is that short): the key
	// alone decides, as in shortKeyIs, and only a row of a longer key has
	// its domain looked for among the batch's, a search that compares it
	// with each domain of the array in turn.
	locked := func(keys string) string {
		return fmt.Sprintf(`SELECT x.domain FROM %[1]s.domains x
	WHERE x.key = ANY ((SELECT %[2]s::bytea[])::bytea[])
		AND (length(x.key) <= %[3]d OR x.domain = ANY ((SELECT $1::bytea[])::bytea[]))
	ORDER BY x.domain FOR UPDATE`, schema, keys, keyBytes)
	}
	// holds is the SQL of whether the row x is t's lease, not due at $5.
	holds := fmt.Sprintf(`x.key = t.key AND x.domain = t.dom AND x.fence = t.fence AND x.serial = t.serial AND $4::bool AND x.lease_off IS NOT NULL
		AND (x.lease_expires_at IS NULL OR %s < x.lease_expires_at)`, callNow(5))
	// run is the SQL of how many leases in a row ClaimNext granted the
	// domain x up to its lease: its streak counts only if its lease is the
	// one ClaimNext granted last.
	const run = "(CASE WHEN x.streak_fence = x.fence THEN x.streak ELSE 0 END)"
	// succeedOne is the SQL of SucceedMany of one lease: $1 domain, $2
	// fence, $3 serial, $4 whether the token's instance is the database's,
	// $5 now, $6 monotonic offsets, and for a long domain $7 its key. A
	// domain left with offsets queued becomes ready; if none other is,
	// waiting claims are notified.
	succeedOne := func(domain string) string {
		return fmt.Sprintf(`WITH u AS (
	UPDATE %[1]s.domains x
	SET %[3]s, ready_at = CASE WHEN x.queued > 0 AND NOT x.paused THEN greatest(%[2]s, (SELECT b.not_before FROM (%[7]s) b)) END
	WHERE %[5]s AND x.fence = $2::bigint AND x.serial = $3::bigint AND $4::bool AND x.lease_off IS NOT NULL
		AND (x.lease_expires_at IS NULL OR %[2]s < x.lease_expires_at)
	RETURNING x.domain, x.key, x.ended_off, x.ended_attempts, x.ended_payload, x.fence, x.ready_at IS NOT NULL AS ready
), gone AS (
	DELETE FROM %[1]s.payloads y USING u WHERE u.ended_payload AND %[6]s AND y.off = u.ended_off
)
SELECT u.domain, u.ended_off, u.ended_attempts, u.fence, %[2]s,
	CASE WHEN u.ready AND NOT (SELECT true FROM %[1]s.domains x WHERE x.ready_at <= %[2]s AND x.domain <> $1
		ORDER BY x.priority DESC, x.ready_at LIMIT 1) IS NOT NULL
		THEN (SELECT true FROM pg_notify('%[4]s', '%[1]s')) END
FROM u`, schema, callNow(5), endLease(6), readyChannel, domain, sameDomain("y", "u"), backlogHead(schema, "x", "y.not_before"))
	}
	return pullStatements{
		// The tables follow: those that idleTables names.
		vacuum: "VACUUM (SKIP_LOCKED, TRUNCATE false, PROCESS_TOAST false) ",
		// The names of the tables, of domains and backlog, that no other
		// session is vacuuming (or analyzing, or otherwise holds the lock a
		// vacuum takes), which PostgreSQL would warn of rather than wait
		// for; "" if none. A copy of the database, made from it as a
		// template, has tables of the same OIDs: its locks are not these
		// tables'.
		idleTables: fmt.Sprintf(`SELECT coalesce(string_agg(t::text, ', '), '')
	FROM unnest(ARRAY['%[1]s.domains'::regclass, '%[1]s.backlog'::regclass]) t
	WHERE NOT EXISTS (SELECT FROM pg_locks l WHERE l.locktype = 'relation' AND l.relation = t
		AND l.mode = 'ShareUpdateExclusiveLock' AND l.granted
		AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database()))`, schema),
		// $1 the key window in microseconds, $2 now, $3 the most keys to
		// delete.
		pruneKeys: fmt.Sprintf("SELECT %s.prune_keys($1::bigint * interval '1 microsecond', $2::timestamptz, $3::int)", schema),
		// Whether the role owns the tables, or is a superuser or a member
		// of their owner, as vacuuming them takes.
		mayVacuum: fmt.Sprintf(`SELECT coalesce(bool_and(pg_has_role(c.relowner, 'USAGE')), false) FROM pg_class c
	WHERE c.oid IN ('%[1]s.domains'::regclass, '%[1]s.backlog'::regclass)`, schema),
		// $1 the most domains to claim, $2 now, $3 the lease TTL in
		// microseconds (0: none), $4 whether to look for more ready
		// domains. Every row says whether a lease is due (then the claim
		// grants nothing, and leaves the due leases to the schema's claim
		// function), how many ready domains the claim locked (it grants
		// those its snapshot still holds) and, if it locked $1 and $4 is
		// set, whether another is ready; a claim that granted nothing
		// returns one row with no domain. A ready domain whose head is
		// scheduled for later (EnqueueAt) is granted nothing: the claim
		// puts it off until then, and counts it as postponed.
		claim: fmt.Sprintf(`WITH r AS MATERIALIZED (
	SELECT d.ctid AS tid, d.domain, d.key, d.priority, d.ready_at FROM %[1]s.domains d
	WHERE d.ready_at <= %[2]s AND NOT %[3]s
	ORDER BY d.priority DESC, d.ready_at LIMIT (SELECT $1::int) FOR UPDATE SKIP LOCKED
), g AS (
	UPDATE %[1]s.domains x
	SET fence = CASE WHEN %[6]s THEN greatest(x.fence, %[1]s.fence_floor()) + 1 ELSE x.fence END, lease_off = CASE WHEN %[6]s THEN b.off END,
		lease_attempts = CASE WHEN %[6]s THEN coalesce(b.carried_attempts, 0) + 1 ELSE 0 END,
		lease_retries = CASE WHEN %[6]s THEN coalesce(b.carried_retries, 0) ELSE 0 END,
		lease_acquired_at = CASE WHEN %[6]s THEN coalesce(b.carried_acquired_at, %[2]s) END,
		lease_expires_at = CASE WHEN %[6]s THEN %[2]s + CASE WHEN $3::bigint = 0 THEN NULL ELSE $3::bigint * interval '1 microsecond' END END,
		queued = x.queued - CASE WHEN %[6]s THEN 1 ELSE 0 END, ready_at = CASE WHEN NOT %[6]s THEN b.not_before END,
		lease_payload = %[6]s AND p.payload IS NOT NULL, counts[1] = x.counts[1] + CASE WHEN %[6]s THEN 1 ELSE 0 END
	FROM r
	CROSS JOIN LATERAL (%[4]s) b
	LEFT JOIN LATERAL (SELECT p.payload FROM %[1]s.payloads p WHERE %[5]s AND p.off = b.off LIMIT 1) p ON true
	WHERE x.ctid = ANY (ARRAY(SELECT tid FROM r)) AND x.ctid = r.tid
	RETURNING CASE WHEN %[6]s THEN x.domain END AS domain, x.lease_off, p.payload, x.fence, x.serial, x.lease_attempts,
		x.lease_expires_at, CASE WHEN %[6]s THEN b.btid END AS btid, r.priority, r.ready_at
), taken AS (
	DELETE FROM %[1]s.backlog y WHERE y.ctid = ANY (ARRAY(SELECT btid FROM g WHERE btid IS NOT NULL))
)
SELECT d.due, d.locked, d.locked >= $1::int AND (SELECT $4::bool) AND (SELECT true FROM %[1]s.domains x
		WHERE x.ready_at <= %[2]s AND x.ctid <> ALL (ARRAY(SELECT tid FROM r))
		ORDER BY x.priority DESC, x.ready_at LIMIT 1) IS NOT NULL,
	g.domain, g.lease_off, g.payload, g.fence, g.serial, g.lease_attempts, g.lease_expires_at, %[2]s,
	g.priority, g.ready_at, d.postponed
FROM (SELECT %[3]s AS due, (SELECT count(*) FROM r) - (SELECT count(*) FROM g WHERE g.domain IS NULL) AS locked,
	(SELECT count(*) FROM g WHERE g.domain IS NULL) AS postponed) d
LEFT JOIN g ON g.domain IS NOT NULL`, schema, callNow(2), due,
			backlogHead(schema, "r", headColumns),
			sameDomain("p", "r"), fmt.Sprintf("(b.not_before IS NULL OR b.not_before <= %s)", callNow(2))),

		succeedOne:     succeedOne(shortKeyIs("x", "$1")),
		succeedOneLong: succeedOne(keyIs("x", "$1", "$7")),

		// $1 domains, $2 fences, $3 serials (a token for each domain), $4
		// whether the tokens' instance is the database's, $5 now, $6
		// monotonic offsets, $7 the domains' keys.
		succeedMany: fmt.Sprintf(`WITH t AS MATERIALIZED (
	%[5]s
), locked AS MATERIALIZED (
	%[6]s
), u AS (
	UPDATE %[1]s.domains x
	SET %[3]s, ready_at = CASE WHEN x.queued > 0 AND NOT x.paused THEN greatest(%[2]s, (SELECT b.not_before FROM (%[10]s) b)) END
	FROM t
	WHERE (SELECT count(*) FROM locked) > 0 AND %[7]s
	RETURNING x.domain, x.key, x.ended_off, x.ended_attempts, x.ended_payload, x.fence, x.ready_at IS NOT NULL AS ready
), gone AS (
	DELETE FROM %[1]s.payloads y USING u WHERE u.ended_payload AND %[9]s AND y.off = u.ended_off
), notified AS (
	SELECT FROM pg_notify('%[4]s', '%[1]s') WHERE EXISTS (SELECT FROM u WHERE u.ready) AND NOT %[8]s
)
SELECT u.domain, u.ended_off, u.ended_attempts, u.fence, %[2]s, n.count > 0
FROM u LEFT JOIN (SELECT count(*) FROM notified) n ON true`,
			schema, callNow(5), endLease(6), readyChannel, tokens("$7"), locked("$7"), holds, othersReady, sameDomain("y", "u"),
			backlogHead(schema, "x", "y.not_before")),

		// $1 domains, $2 fences, $3 serials (a token for each domain), $4
		// whether the tokens' instance is the database's, $5 now, $6
		// monotonic offsets, $7 the lease TTL in microseconds (0: none), $8
		// the domains' keys. Each lease it ends is succeeded as succeedMany
		// does; its domain's next offset is granted in the same UPDATE if
		// the condition next holds, and the domain becomes ready otherwise.
		// The backlogs' heads are read as the statement's snapshot has
		// them, before the locks: next holds only for a row still in that
		// snapshot's version (as in claim), which the row being updated, x,
		// shows by its ctid, or for one whose backlog has only grown at its
		// back since (see onlyAppended): a producer storing into a domain
		// while its job runs leaves the head it had.
		claimNext: fmt.Sprintf(`WITH s AS MATERIALIZED (
	SELECT t.*, x.ctid AS tid, x.front_pos AS front_was, x.back_pos AS back_was, x.queued AS queued_was,
		b.btid, b.off, b.carried_attempts, b.carried_retries, b.carried_acquired_at, b.not_before, p.payload
	FROM (%[5]s) t
	JOIN %[1]s.domains x ON x.key = t.key AND x.domain = t.dom
	LEFT JOIN LATERAL (%[10]s) b ON true
	LEFT JOIN LATERAL (SELECT p.payload FROM %[1]s.payloads p WHERE %[11]s AND p.off = b.off LIMIT 1) p ON true
), locked AS MATERIALIZED (
	%[6]s
), u AS (
	UPDATE %[1]s.domains x
	SET ended_off = x.lease_off, ended_attempts = x.lease_attempts, ended_payload = x.lease_payload,
		processed = CASE WHEN $6::bool
			THEN nummultirange(numrange(0, greatest(coalesce(upper(x.processed), 0), x.lease_off::numeric + 1)))
			ELSE x.processed + nummultirange(numrange(x.lease_off, x.lease_off::numeric + 1)) END,
		fence = CASE WHEN %[3]s THEN greatest(x.fence, %[1]s.fence_floor()) + 1 ELSE x.fence END,
		lease_off = CASE WHEN %[3]s THEN t.off END,
		lease_attempts = CASE WHEN %[3]s THEN coalesce(t.carried_attempts, 0) + 1 ELSE 0 END,
		lease_retries = CASE WHEN %[3]s THEN coalesce(t.carried_retries, 0) ELSE 0 END,
		lease_acquired_at = CASE WHEN %[3]s THEN coalesce(t.carried_acquired_at, %[2]s) END,
		lease_expires_at = CASE WHEN %[3]s AND $7::bigint <> 0 THEN %[2]s + $7::bigint * interval '1 microsecond' END,
		lease_payload = %[3]s AND t.payload IS NOT NULL,
		queued = x.queued - CASE WHEN %[3]s THEN 1 ELSE 0 END,
		ready_at = CASE WHEN NOT %[3]s AND x.queued > 0 AND NOT x.paused THEN greatest(%[2]s, t.not_before) END,
		streak = CASE WHEN %[3]s THEN %[9]s + 1 ELSE 0 END,
		streak_fence = CASE WHEN %[3]s THEN greatest(x.fence, %[1]s.fence_floor()) + 1 ELSE 0 END,
		streak_from = CASE WHEN %[3]s THEN x.fence ELSE 0 END,
		counts[1] = x.counts[1] + CASE WHEN %[3]s THEN 1 ELSE 0 END, counts[3] = x.counts[3] + 1
	FROM s AS t
	WHERE (SELECT count(*) FROM locked) > 0 AND %[7]s
	RETURNING x.domain, x.key, x.ended_off, x.ended_attempts, x.ended_payload, t.fence AS ended_fence, x.ready_at IS NOT NULL AS ready,
		x.lease_off, t.btid, t.payload, x.fence, x.serial, x.lease_attempts, x.lease_expires_at
), taken AS (
	DELETE FROM %[1]s.backlog y WHERE y.ctid = ANY (ARRAY(SELECT btid FROM u WHERE u.lease_off IS NOT NULL))
), gone AS (
	DELETE FROM %[1]s.payloads y USING u WHERE u.ended_payload AND %[12]s AND y.off = u.ended_off
), notified AS (
	SELECT FROM pg_notify('%[4]s', '%[1]s') WHERE EXISTS (SELECT FROM u WHERE u.ready) AND NOT %[8]s
)
SELECT u.domain, u.ended_off, u.ended_attempts, u.ended_fence, %[2]s,
	u.lease_off, CASE WHEN u.lease_off IS NOT NULL THEN u.payload END, u.fence, u.serial, u.lease_attempts, u.lease_expires_at,
	n.count > 0
FROM u LEFT JOIN (SELECT count(*) FROM notified) n ON true`, schema, callNow(5),
			fmt.Sprintf("((x.ctid = t.tid OR %s) AND t.off IS NOT NULL AND NOT x.paused AND %s < %d AND (t.not_before IS NULL OR t.not_before <= %s))",
				onlyAppended, run, MaxStreak, callNow(5)),
			readyChannel, tokens("$8"), locked("$8"), holds, othersReady, run,
			backlogHead(schema, "x", headColumns),
			sameDomain("p", "x"), sameDomain("y", "u")),

		// $1 domain, $2 fence, $3 serial, $4 now: the lease in flight, not
		// due at $4, if ClaimNext granted it as it ended the lease of the
		// token ($2, $3), the one before it. It reads without locking: the
		// lease it finds may end at once, as any holder's may.
		repeatNext: fmt.Sprintf(`SELECT x.lease_off, p.payload, x.fence, x.serial, x.lease_attempts, x.lease_expires_at
FROM %[1]s.domains x
LEFT JOIN %[1]s.payloads p ON x.lease_payload AND %[3]s AND p.off = x.lease_off
WHERE %[4]s AND x.serial = $3::bigint AND x.streak_fence = x.fence
	AND (x.streak_from = $2::bigint OR x.streak_from = 0 AND x.fence = $2::bigint + 1) -- 0: granted before streak_from was kept
	AND x.lease_off IS NOT NULL AND (x.lease_expires_at IS NULL OR %[2]s < x.lease_expires_at)`, schema, callNow(4),
			sameDomain("p", "x"), domainIs(schema, "x", "$1")),
	}
}

// repeatedNext returns the lease ClaimNext granted as it ended the lease
// of tok on domain, if it is still in flight: ClaimNext was repeated,
// after its answer was lost.
func (m *Manager) repeatedNext(ctx context.Context, domain string, tok worklease.Token) (worklease.Claim, bool, error) {
	c, err := m.conn(ctx, "ClaimNext")
	if err != nil {
		return worklease.Claim{}, false, err
	}
	defer c.release()
	var off, fence, serial int64
	var attempts int32
	var payload []byte
	var expires *time.Time
	err = c.QueryRow(ctx, m.pull.repeatNext, []byte(domain), int64(tok.Fence()), int64(tok.Serial()), m.now()).
		Scan(&off, &payload, &fence, &serial, &attempts, &expires)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return worklease.Claim{}, false, nil
	case err != nil:
		return worklease.Claim{}, false, c.fail("ClaimNext", err)
	}
	return worklease.Claim{Domain: domain, Offset: off, Payload: payload, Token: m.token(fence, serial), Attempt: int(attempts),
		ExpiresAt: timeOf(expires)}, true, nil
}

// A fastClaim is what claimFast did: the leases it granted, in the order
// of their domains' priority, then of the time they became ready; whether
// a lease is due, in which case it granted none; how many ready domains
// it locked and left, as another call had changed them since its
// snapshot; and whether, having locked as many as it was asked for, it
// left another domain ready.
type fastClaim struct {
	claims  []worklease.Claim
	due     bool
	skipped int64
	more    bool
	// postponed is how many domains the claim found ready whose head is
	// scheduled for later: it put them off, and granted fewer than asked.
	postponed int64
}

// claimFast leases the heads of up to n ready domains in one statement;
// with more, a claim that locked n domains looks for another that is ready
// (an index probe, which only WaitClaim needs).
func (m *Manager) claimFast(ctx context.Context, conn *callConn, n int, more bool) (fastClaim, error) {
	var out fastClaim
	rows, err := conn.Query(ctx, m.pull.claim, n, m.now(), m.ttl(), more)
	if err != nil {
		return out, conn.fail("Claim", err)
	}
	defer rows.Close()
	type ranked struct {
		c        worklease.Claim
		priority int32
		readyAt  time.Time
	}
	var all []ranked
	var locked int64
	for rows.Next() {
		var d []byte
		var r ranked
		var off, fence, serial *int64 // NULL in the one row of a claim that granted nothing
		var attempts, priority *int32
		var expires, readyAt *time.Time
		var at time.Time
		if err := rows.Scan(&out.due, &locked, &out.more, &d, &off, &r.c.Payload, &fence, &serial, &attempts, &expires, &at,
			&priority, &readyAt, &out.postponed); err != nil {
			return fastClaim{}, conn.fail("Claim", err)
		}
		if d == nil {
			continue
		}
		r.c.Domain, r.c.Offset, r.c.Token, r.c.Attempt, r.c.ExpiresAt = string(d), *off, m.token(*fence, *serial), int(*attempts), timeOf(expires)
		r.priority, r.readyAt = *priority, *readyAt
		if m.cfg.Observer != nil {
			a := answer{serial: *serial, at: &at}
			a.event(worklease.EventAcquired, *off, *attempts, *fence)
			m.report(r.c.Domain, &a, nil, worklease.Token{}, nil)
		}
		all = append(all, r)
	}
	if err := rows.Err(); err != nil {
		return fastClaim{}, conn.fail("Claim", err)
	}
	slices.SortFunc(all, func(a, b ranked) int {
		if c := cmp.Compare(b.priority, a.priority); c != 0 {
			return c
		}
		return a.readyAt.Compare(b.readyAt)
	})
	for _, r := range all {
		out.claims = append(out.claims, r.c)
	}
	out.skipped = locked - int64(len(out.claims))
	return out, nil
}

// An ended lease is one that SucceedMany or ClaimNext ended at once, with
// the lease ClaimNext granted next, if any (its Domain unset).
type ended struct {
	domain     []byte
	off, fence int64
	attempts   int32
	at         time.Time
	next       *worklease.Claim
}

// endBatch ends the leases of the tokens (fences, serials) on domains, one
// token for each domain, that it can end at once, in one statement, and
// returns them; with next, it leases the next offsets as ClaimNext does.
func (m *Manager) endBatch(ctx context.Context, op string, domains [][]byte, fences, serials []int64, next bool) ([]ended, error) {
	c, err := m.conn(ctx, op)
	if err != nil {
		return nil, err
	}
	defer c.release()
	var keys [][]byte
	if next || len(domains) > 1 {
		keys = make([][]byte, len(domains))
		for i, d := range domains {
			keys[i] = key(d)
		}
	}
	var rows pgx.Rows
	switch {
	case next:
		rows, err = c.Query(ctx, m.pull.claimNext, domains, fences, serials, true, m.now(), m.cfg.MonotonicOffsets, m.ttl(), keys)
	case len(domains) == 1:
		if len(domains[0]) > keyBytes {
			rows, err = c.Query(ctx, m.pull.succeedOneLong, domains[0], fences[0], serials[0], true, m.now(), m.cfg.MonotonicOffsets, key(domains[0]))
		} else {
			rows, err = c.Query(ctx, m.pull.succeedOne, domains[0], fences[0], serials[0], true, m.now(), m.cfg.MonotonicOffsets)
		}
	default:
		rows, err = c.Query(ctx, m.pull.succeedMany, domains, fences, serials, true, m.now(), m.cfg.MonotonicOffsets, keys)
	}
	if err != nil {
		return nil, c.fail(op, err)
	}
	defer rows.Close()
	var all []ended
	for rows.Next() {
		var e ended
		var notified *bool // whether the call notified waiting claims (see WaitClaim)
		dest := []any{&e.domain, &e.off, &e.attempts, &e.fence, &e.at}
		var off, fence, serial *int64
		var attempts *int32
		var payload []byte
		var expires *time.Time
		if next {
			dest = append(dest, &off, &payload, &fence, &serial, &attempts, &expires)
		}
		if err := rows.Scan(append(dest, &notified)...); err != nil {
			return nil, c.fail(op, err)
		}
		if off != nil {
			e.next = &worklease.Claim{Offset: *off, Payload: payload, Token: m.token(*fence, *serial), Attempt: int(*attempts), ExpiresAt: timeOf(expires)}
		}
		all = append(all, e)
	}
	if err := rows.Err(); err != nil {
		return nil, c.fail(op, err)
	}
	return all, nil
}
