-- The producers' calls: duplicates that say which state their offset is
-- in, or that refuse another payload; Append, which assigns the domain's
-- next offset, with idempotency keys kept for a window; and Cancel, which
-- ends a queued offset (or, asked to, the one in flight) so that it never
-- runs, counted as an event of its own.
--
-- Statuses are worklease.AcquireStatus (6: AlreadyQueued); error codes
-- are errorOf's (11: ErrPayloadMismatch, 12: ErrNotQueued, 13:
-- ErrInFlight); event kind 17 is worklease.EventCancelled, which the
-- counts arrays gain.

UPDATE {{schema}}.meta SET counts = counts || (array_fill(0::bigint, ARRAY[17]))[cardinality(counts) + 1:]
WHERE cardinality(counts) < 17; -- its one row: its default does not matter, and readers of meta need not wait
UPDATE {{schema}}.domains SET counts = counts || (array_fill(0::bigint, ARRAY[17]))[cardinality(counts) + 1:]
WHERE cardinality(counts) < 17;
ALTER TABLE {{schema}}.domains ALTER COLUMN counts SET DEFAULT array_fill(0::bigint, ARRAY[17]);

-- The idempotency keys of Append: a key names the offset its first Append
-- was assigned, with the SHA-256 of that Append's payload (NULL for none),
-- until the key window after at. The Manager deletes those past it as it
-- vacuums (see vacuum.go); a lookup ignores them meanwhile.
CREATE TABLE {{schema}}.append_keys (
	domain bytea NOT NULL,
	key bytea GENERATED ALWAYS AS ({{schema}}._key(domain)) STORED, -- the domain's (see 006_domain_keys.sql)
	ikey bytea NOT NULL,
	off bigint NOT NULL,
	sum bytea,
	at timestamptz NOT NULL,
	PRIMARY KEY (key, ikey)
);
CREATE INDEX append_keys_at ON {{schema}}.append_keys (at);

-- Scheduled work: a backlog row may carry the time before which its
-- offset is not granted. While such an offset is its domain's head, the
-- domain grants nothing, and the offsets behind it wait too: claims that
-- find it ready put its ready_at off to that time, and the calls that
-- grant a head themselves (TryAcquire, SucceedNext, FailNext, ClaimNext)
-- leave it queued.
ALTER TABLE {{schema}}.backlog ADD COLUMN not_before timestamptz;

-- _due reports whether off, queued in domain, may be granted at p_now.
CREATE FUNCTION {{schema}}._due(p_domain bytea, p_off bigint, p_now timestamptz) RETURNS bool
LANGUAGE sql STABLE AS $$
	SELECT coalesce((SELECT b.not_before <= p_now FROM {{schema}}.backlog b
		WHERE b.key = {{schema}}._key(p_domain) AND b.domain = p_domain AND b.off = p_off), true)
$$;

-- _enqueue is Enqueue, and EnqueueAt with p_not_before: an offset is
-- queued with p_payload, not to be granted before p_not_before if that is
-- after p_now. An offset the domain holds already keeps its payload and
-- its time: the answer says its state (AlreadyQueued for one queued), or
-- error 11 if it is queued, in flight or failed with another payload.
CREATE FUNCTION {{schema}}._enqueue(p_domain bytea, p_off bigint, p_payload bytea, p_not_before timestamptz,
	p_now timestamptz, p {{schema}}.policy)
RETURNS {{schema}}.answer
LANGUAGE plpgsql AS $$
DECLARE
	k bytea := {{schema}}._key(p_domain);
	d {{schema}}.domains;
	evs {{schema}}.event[];
	st smallint;
	h bigint;
BEGIN
	p_now := coalesce(p_now, clock_timestamp());
	PERFORM {{schema}}._lock(p_domain, true);
	evs := {{schema}}._expire(p_domain, p_now, p);
	SELECT * INTO d FROM {{schema}}.domains x WHERE x.key = k AND x.domain = p_domain;
	st := {{schema}}._state(d, p_off, p.monotonic);
	IF st IN (2, 5, 6) AND {{schema}}._stored(d, p_off) IS DISTINCT FROM p_payload THEN
		RETURN {{schema}}._finish(p_domain, 0::smallint, 11::smallint, NULL, 0, evs, p_now);
	ELSIF st IS NOT NULL THEN
		RETURN {{schema}}._finish(p_domain, st, 0::smallint, NULL, 0, evs, p_now);
	END IF;
	IF p.lifo THEN
		h := {{schema}}._head(p_domain);
	END IF;
	PERFORM {{schema}}._push(p_domain, p_off, p.lifo, p_payload => p_payload);
	IF p_not_before > p_now THEN
		UPDATE {{schema}}.backlog b SET not_before = p_not_before WHERE b.key = k AND b.domain = p_domain AND b.off = p_off;
	END IF;
	IF p.lifo AND NOT {{schema}}._due(p_domain, h, p_now) THEN -- a new head: the one before waits no more for its time
		PERFORM {{schema}}._end_delay(p_domain, h, p_now);
	END IF;
	evs := evs || ROW(2, p_off, 0, 0, 0)::{{schema}}.event;
	RETURN {{schema}}._finish(p_domain, 3::smallint, 0::smallint, NULL, 0, evs, p_now);
END $$;

-- enqueue is Enqueue.
CREATE OR REPLACE FUNCTION {{schema}}.enqueue(p_domain bytea, p_off bigint, p_payload bytea, p_now timestamptz, p {{schema}}.policy)
RETURNS {{schema}}.answer
LANGUAGE sql AS $$
	SELECT {{schema}}._enqueue(p_domain, p_off, p_payload, NULL, p_now, p)
$$;

-- enqueue_at is EnqueueAt.
CREATE FUNCTION {{schema}}.enqueue_at(p_domain bytea, p_off bigint, p_payload bytea, p_not_before timestamptz,
	p_now timestamptz, p {{schema}}.policy)
RETURNS {{schema}}.answer
LANGUAGE sql AS $$
	SELECT {{schema}}._enqueue(p_domain, p_off, p_payload, p_not_before, p_now, p)
$$;

-- _state returns the state of off in d (whose row the caller locked) as
-- an AcquireStatus: 4 processed (cancelled too), 5 failed, 2 in flight, 6
-- queued; NULL if the domain does not hold it.
CREATE FUNCTION {{schema}}._state(d {{schema}}.domains, p_off bigint, p_monotonic bool) RETURNS smallint
LANGUAGE plpgsql STABLE AS $$
BEGIN
	IF {{schema}}._processed(d, p_off, p_monotonic) THEN
		RETURN 4;
	ELSIF EXISTS (SELECT FROM {{schema}}.dead_letters x WHERE x.key = d.key AND x.domain = d.domain AND x.off = p_off) THEN
		RETURN 5;
	ELSIF d.lease_off = p_off THEN
		RETURN 2;
	ELSIF EXISTS (SELECT FROM {{schema}}.backlog b WHERE b.key = d.key AND b.domain = d.domain AND b.off = p_off) THEN
		RETURN 6;
	END IF;
	RETURN NULL;
END $$;

-- _stored returns the payload off of d was stored with: NULL for none.
CREATE FUNCTION {{schema}}._stored(d {{schema}}.domains, p_off bigint) RETURNS bytea
LANGUAGE sql STABLE AS $$
	SELECT y.payload FROM {{schema}}.payloads y WHERE y.key = d.key AND y.domain = d.domain AND y.off = p_off
$$;

-- try_acquire is TryAcquire, and Enqueue with p_grant unset (see
-- _enqueue). An idle domain whose head is scheduled for later grants
-- nothing before then: the offset asked for is queued.
CREATE OR REPLACE FUNCTION {{schema}}.try_acquire(p_domain bytea, p_off bigint, p_now timestamptz, p {{schema}}.policy,
	p_grant bool DEFAULT true, p_payload bytea DEFAULT NULL)
RETURNS {{schema}}.answer
LANGUAGE plpgsql AS $$
DECLARE
	k bytea := {{schema}}._key(p_domain);
	d {{schema}}.domains;
	evs {{schema}}.event[];
	h bigint;
	st smallint := 0;
	e smallint := 0;
BEGIN
	IF NOT p_grant THEN
		RETURN {{schema}}._enqueue(p_domain, p_off, p_payload, NULL, p_now, p);
	END IF;
	p_now := coalesce(p_now, clock_timestamp());
	PERFORM {{schema}}._lock(p_domain, true);
	evs := {{schema}}._expire(p_domain, p_now, p);
	SELECT * INTO d FROM {{schema}}.domains x WHERE x.key = k AND x.domain = p_domain;
	IF {{schema}}._processed(d, p_off, p.monotonic) THEN
		st := 4;
	ELSIF EXISTS (SELECT FROM {{schema}}.dead_letters x WHERE x.key = k AND x.domain = p_domain AND x.off = p_off) THEN
		st := 5;
	ELSIF d.lease_off = p_off THEN
		st := 2;
	ELSE
		h := {{schema}}._head(p_domain);
		IF d.lease_off IS NOT NULL OR d.paused OR h IS NOT NULL AND NOT {{schema}}._due(p_domain, h, p_now) THEN
			st := 3;
			IF {{schema}}._push(p_domain, p_off, p.lifo, p_payload => p_payload) THEN
				evs := evs || ROW(2, p_off, 0, 0, 0)::{{schema}}.event;
			END IF;
		ELSIF h IS NOT NULL AND h <> p_off AND NOT p.best_effort THEN
			e := 5;
		ELSE
			IF h IS NOT NULL AND h <> p_off THEN
				evs := evs || ROW(10, p_off, 0, 0, 0)::{{schema}}.event;
			END IF;
			evs := evs || {{schema}}._grant(p_domain, p_off, p_now, p);
			st := 1;
		END IF;
	END IF;
	RETURN {{schema}}._finish(p_domain, st, e, NULL, 0, evs, p_now);
END $$;

-- append is Append: it stores p_payload under the domain's next offset,
-- one more than the highest it holds in any state (0 for none), which it
-- returns in the answer's hint, not to be granted before p_not_before if
-- that is after p_now. With a key (p_ikey not NULL) seen within
-- p_window, it stores nothing and answers with that key's offset and its
-- state, or error 11 if p_payload is not the one stored with it. The
-- domain's row lock orders the Appends on a domain: each takes its offset
-- as it takes effect, and commits before the next one reads.
CREATE FUNCTION {{schema}}.append(p_domain bytea, p_payload bytea, p_ikey bytea, p_window interval,
	p_not_before timestamptz, p_now timestamptz, p {{schema}}.policy)
RETURNS {{schema}}.answer
LANGUAGE plpgsql AS $$
DECLARE
	k bytea := {{schema}}._key(p_domain);
	d {{schema}}.domains;
	evs {{schema}}.event[];
	seen {{schema}}.append_keys;
	st smallint;
	next numeric;
	h bigint;
BEGIN
	p_now := coalesce(p_now, clock_timestamp());
	PERFORM {{schema}}._lock(p_domain, true);
	evs := {{schema}}._expire(p_domain, p_now, p);
	SELECT * INTO d FROM {{schema}}.domains x WHERE x.key = k AND x.domain = p_domain;
	IF p_ikey IS NOT NULL THEN
		SELECT * INTO seen FROM {{schema}}.append_keys y
		WHERE y.key = k AND y.domain = p_domain AND y.ikey = p_ikey AND y.at > p_now - p_window;
		IF FOUND THEN
			st := {{schema}}._state(d, seen.off, p.monotonic);
			-- A key whose offset the domain no longer holds (it was
			-- forgotten since) is no longer seen.
			IF st IS NOT NULL THEN
				IF seen.sum IS DISTINCT FROM sha256(p_payload) THEN
					RETURN {{schema}}._finish(p_domain, 0::smallint, 11::smallint, NULL, 0, evs, p_now);
				END IF;
				RETURN {{schema}}._finish(p_domain, st, 0::smallint, seen.off, 0, evs, p_now);
			END IF;
		END IF;
	END IF;
	next := greatest(coalesce(upper(d.processed), 0),
		coalesce((SELECT max(b.off) FROM {{schema}}.backlog b WHERE b.key = k AND b.domain = p_domain)::numeric + 1, 0),
		coalesce((SELECT max(x.off) FROM {{schema}}.dead_letters x WHERE x.key = k AND x.domain = p_domain)::numeric + 1, 0),
		coalesce(d.lease_off::numeric + 1, 0));
	IF next > 9223372036854775807 THEN
		RETURN {{schema}}._finish(p_domain, 0::smallint, 14::smallint, NULL, 0, evs, p_now);
	END IF;
	IF p.lifo THEN
		h := {{schema}}._head(p_domain);
	END IF;
	PERFORM {{schema}}._push(p_domain, next::bigint, p.lifo, p_payload => p_payload);
	IF p_not_before > p_now THEN
		UPDATE {{schema}}.backlog b SET not_before = p_not_before WHERE b.key = k AND b.domain = p_domain AND b.off = next::bigint;
	END IF;
	IF p.lifo AND NOT {{schema}}._due(p_domain, h, p_now) THEN -- a new head: the one before waits no more for its time
		PERFORM {{schema}}._end_delay(p_domain, h, p_now);
	END IF;
	evs := evs || ROW(2, next::bigint, 0, 0, 0)::{{schema}}.event;
	IF p_ikey IS NOT NULL THEN
		INSERT INTO {{schema}}.append_keys AS y (domain, ikey, off, sum, at)
		VALUES (p_domain, p_ikey, next::bigint, sha256(p_payload), p_now)
		ON CONFLICT (key, ikey) DO UPDATE SET off = excluded.off, sum = excluded.sum, at = excluded.at;
	END IF;
	RETURN {{schema}}._finish(p_domain, 3::smallint, 0::smallint, next::bigint, 0, evs, p_now);
END $$;

-- prune_keys deletes up to p_limit idempotency keys past p_window at
-- p_now, the oldest first, and returns how many it deleted.
CREATE FUNCTION {{schema}}.prune_keys(p_window interval, p_now timestamptz, p_limit int) RETURNS bigint
LANGUAGE sql AS $$
	WITH gone AS (
		DELETE FROM {{schema}}.append_keys y WHERE y.ctid = ANY (ARRAY(
			SELECT z.ctid FROM {{schema}}.append_keys z WHERE z.at <= coalesce(p_now, clock_timestamp()) - p_window
			ORDER BY z.at LIMIT p_limit))
		RETURNING 1
	)
	SELECT count(*) FROM gone
$$;

-- cancel is Cancel: off, queued (or in flight, if p_in_flight is set),
-- leaves the domain's line and counts as processed, without a dead
-- letter; its payload goes. A lease on it is revoked, as an operator's
-- Kill revokes one: its holder is refused with ErrLeaseRevoked.
CREATE FUNCTION {{schema}}.cancel(p_domain bytea, p_off bigint, p_in_flight bool, p_now timestamptz, p {{schema}}.policy)
RETURNS {{schema}}.answer
LANGUAGE plpgsql AS $$
DECLARE
	k bytea := {{schema}}._key(p_domain);
	head bigint := {{schema}}._head_locked(p_domain);
	c record;
	d {{schema}}.domains;
	evs {{schema}}.event[];
	st smallint;
	n int;
	a {{schema}}.answer;
BEGIN
	p_now := coalesce(p_now, clock_timestamp());
	SELECT * INTO c FROM {{schema}}._open(p_domain, false, p_now, p);
	IF c.d IS NULL THEN -- a domain the database does not know holds no offset
		a := {{schema}}._absent();
		a.err := 12;
		RETURN a;
	END IF;
	d := c.d;
	evs := c.evs;
	st := {{schema}}._state(d, p_off, p.monotonic);
	IF st = 4 THEN
		RETURN {{schema}}._finish(p_domain, 0::smallint, 7::smallint, NULL, 0, evs, p_now);
	ELSIF st IS NULL OR st = 5 THEN
		RETURN {{schema}}._finish(p_domain, 0::smallint, 12::smallint, NULL, 0, evs, p_now);
	ELSIF st = 2 AND NOT p_in_flight THEN
		RETURN {{schema}}._finish(p_domain, 0::smallint, 13::smallint, NULL, 0, evs, p_now);
	END IF;
	IF st = 2 THEN
		evs := evs || ROW(17, p_off, d.lease_attempts, d.fence, 0)::{{schema}}.event;
		PERFORM {{schema}}._revoke(p_domain, d.fence, 2::smallint);
	ELSE
		DELETE FROM {{schema}}.backlog b WHERE b.key = k AND b.domain = p_domain AND b.off = p_off
		RETURNING coalesce(b.carried_attempts, 0) INTO n;
		UPDATE {{schema}}.domains x SET queued = x.queued - 1 WHERE x.key = k AND x.domain = p_domain;
		evs := evs || ROW(17, p_off, n, 0, 0)::{{schema}}.event;
	END IF;
	PERFORM {{schema}}._terminal(p_domain, p_off, true, p.monotonic);
	PERFORM {{schema}}._end_delay(p_domain, head, p_now);
	RETURN {{schema}}._finish(p_domain, 0::smallint, 0::smallint, NULL, 0, evs, p_now);
END $$;

-- forget is Forget; a forgotten domain's counts have every kind.
CREATE OR REPLACE FUNCTION {{schema}}.forget(p_domain bytea, p_now timestamptz, p {{schema}}.policy)
RETURNS {{schema}}.answer
LANGUAGE plpgsql AS $$
DECLARE
	k bytea := {{schema}}._key(p_domain);
	c record;
	d {{schema}}.domains;
	evs {{schema}}.event[];
	a {{schema}}.answer;
BEGIN
	p_now := coalesce(p_now, clock_timestamp());
	SELECT * INTO c FROM {{schema}}._open(p_domain, false, p_now, p);
	IF c.d IS NULL THEN
		RETURN {{schema}}._absent();
	END IF;
	d := c.d;
	evs := c.evs;
	IF d.lease_off IS NOT NULL OR d.paused
		OR EXISTS (SELECT FROM {{schema}}.backlog b WHERE b.key = k AND b.domain = p_domain) THEN
		RETURN {{schema}}._finish(p_domain, 0::smallint, 8::smallint, NULL, 0, evs, p_now);
	END IF;
	evs := evs || ROW(16, -1, 0, 0, 0)::{{schema}}.event;
	a := {{schema}}._finish(p_domain, 0::smallint, 0::smallint, NULL, 0, evs, p_now);
	DELETE FROM {{schema}}.dead_letters x WHERE x.key = k AND x.domain = p_domain;
	DELETE FROM {{schema}}.payloads x WHERE x.key = k AND x.domain = p_domain;
	DELETE FROM {{schema}}.append_keys x WHERE x.key = k AND x.domain = p_domain;
	UPDATE {{schema}}.meta m
	SET counts = (SELECT array_agg(coalesce(u.x, 0) + coalesce(u.y, 0) ORDER BY u.i) FROM unnest(m.counts,
		(SELECT x.counts FROM {{schema}}.domains x WHERE x.key = k AND x.domain = p_domain)) WITH ORDINALITY AS u(x, y, i));
	UPDATE {{schema}}.domains x
	SET forgotten = true, processed = '{}', revoked_fence = 0, revoked_why = 0, front_pos = 0, back_pos = 0, failed = 0,
		ended_off = NULL, ended_attempts = NULL, priority = 0,
		counts = array_fill(0::bigint, ARRAY[17])
	WHERE x.key = k AND x.domain = p_domain;
	RETURN a;
END $$;

-- enqueue_many is EnqueueMany: Enqueue of each item, as try_acquire
-- decides it. An item that repeats an offset queued already, or one given
-- earlier in the batch, is AlreadyQueued. If an item's offset is queued,
-- in flight or failed with another payload (or given earlier in the batch
-- with another), the batch stores nothing: that item's answer has error
-- 11, and the domains the batch created are gone again.
CREATE OR REPLACE FUNCTION {{schema}}.enqueue_many(p_domains bytea[], p_offs bigint[], p_payloads bytea[],
	p_now timestamptz, p {{schema}}.policy)
RETURNS TABLE (i int, a {{schema}}.answer)
LANGUAGE plpgsql AS $$
DECLARE
	doms bytea[];
	dom_keys bytea[];
	created bytea[];
	revived bytea[];
	due bool;
	done int[];
	answers {{schema}}.answer[];
BEGIN
	p_now := coalesce(p_now, clock_timestamp());
	SELECT array_agg(u.dom ORDER BY u.dom), array_agg({{schema}}._key(u.dom) ORDER BY u.dom) INTO doms, dom_keys
	FROM (SELECT DISTINCT v.dom FROM unnest(p_domains) AS v(dom)) u;
	WITH n AS (
		INSERT INTO {{schema}}.domains (domain, serial)
		SELECT u.dom, nextval('{{schema}}.domain_serial') FROM unnest(doms, dom_keys) AS u(dom, k)
		WHERE NOT EXISTS (SELECT FROM {{schema}}.domains x WHERE x.key = u.k AND x.domain = u.dom)
		ORDER BY u.dom
		ON CONFLICT (key) DO NOTHING
		RETURNING domain
	)
	SELECT array_agg(n.domain) INTO created FROM n;
	-- One statement locks the domains in order and reads what the batch
	-- needs of them: which were forgotten, and whether a lease is due.
	SELECT array_agg(l.domain) FILTER (WHERE l.forgotten), coalesce(bool_or(l.lease_expires_at <= p_now), false)
	INTO revived, due
	FROM (SELECT x.domain, x.forgotten, x.lease_expires_at FROM {{schema}}.domains x
		WHERE x.key = ANY (dom_keys) AND x.domain = ANY (doms) ORDER BY x.domain FOR UPDATE) l;
	IF revived IS NOT NULL THEN
		UPDATE {{schema}}.domains x SET forgotten = false WHERE x.key = ANY (dom_keys) AND x.domain = ANY (revived);
	END IF;
	IF due THEN
		-- One item at a time, as Enqueue, in a subtransaction that a
		-- mismatch rolls back.
		BEGIN
			FOR i IN SELECT u.n FROM unnest(p_domains) WITH ORDINALITY AS u(dom, n) ORDER BY u.dom, u.n LOOP
				a := {{schema}}.try_acquire(p_domains[i], p_offs[i], p_now, p, false, p_payloads[i]);
				IF (a).err = 11 THEN
					RAISE SQLSTATE 'WL011';
				END IF;
				done := done || i;
				answers := answers || a;
			END LOOP;
		EXCEPTION WHEN SQLSTATE 'WL011' THEN
			UPDATE {{schema}}.domains x SET forgotten = true WHERE x.key = ANY (dom_keys) AND x.domain = ANY (revived);
			DELETE FROM {{schema}}.domains x WHERE x.key = ANY (dom_keys) AND x.domain = ANY (created);
			RETURN NEXT;
			RETURN;
		END;
		RETURN QUERY SELECT u.i, answers[u.n] FROM unnest(done) WITH ORDINALITY AS u(i, n);
		RETURN;
	END IF;

	-- Each item's status (worklease.AcquireStatus), as try_acquire decides
	-- it, and whether it is new: Enqueued, neither queued already nor given
	-- earlier in the batch. New items take their places in their domain's
	-- line in the order given: at the back, or at the front with LIFO
	-- ordering, each in front of the one before it.
	RETURN QUERY
	WITH t AS (
		SELECT u.i::int AS i, u.dom, d.key, u.off, u.payload, d.serial, d.front_pos, d.back_pos, q.queued IS NOT NULL AS queued,
			CASE
				WHEN d.processed @> u.off::numeric AND NOT (p.monotonic
					AND (d.lease_off IS NOT DISTINCT FROM u.off OR f.dead IS NOT NULL OR q.queued IS NOT NULL)) THEN 4
				WHEN f.dead IS NOT NULL THEN 5
				WHEN d.lease_off = u.off THEN 2
				WHEN q.queued IS NOT NULL THEN 6
				ELSE 3
			END::smallint AS status,
			sp.payload AS stored
		FROM unnest(p_domains, p_offs, p_payloads) WITH ORDINALITY AS u(dom, off, payload, i)
		JOIN {{schema}}.domains d ON d.key = {{schema}}._key(u.dom) AND d.domain = u.dom
		-- Probes of one row each (LIMIT 1 keeps them so, where EXISTS may
		-- becomes a scan of the whole table); a domain with no dead
		-- letters has none to probe.
		LEFT JOIN LATERAL (SELECT true AS dead FROM {{schema}}.dead_letters x
			WHERE d.failed > 0 AND x.key = d.key AND x.domain = u.dom AND x.off = u.off LIMIT 1) f ON true
		LEFT JOIN LATERAL (SELECT true AS queued FROM {{schema}}.backlog b
			WHERE b.key = d.key AND b.domain = u.dom AND b.off = u.off LIMIT 1) q ON true
		-- The payload an offset the domain holds was stored with, read
		-- only for those.
		LEFT JOIN LATERAL (SELECT y.payload FROM {{schema}}.payloads y
			WHERE (f.dead IS NOT NULL OR q.queued IS NOT NULL OR d.lease_off = u.off)
				AND y.key = d.key AND y.domain = u.dom AND y.off = u.off LIMIT 1) sp ON true
	), w AS (
		SELECT t.*, t.i = first_value(t.i) OVER o AS first, first_value(t.payload) OVER o AS first_payload
		FROM t WINDOW o AS (PARTITION BY t.dom, t.off ORDER BY t.i)
	), s AS MATERIALIZED (
		SELECT w.i, w.dom, w.key, w.off, w.payload, w.serial, w.front_pos, w.back_pos,
			CASE WHEN w.status = 3 AND NOT w.first THEN 6 ELSE w.status END::smallint AS status,
			w.status = 3 AND w.first AS fresh,
			CASE
				WHEN w.status IN (2, 5, 6) THEN w.stored IS DISTINCT FROM w.payload
				WHEN w.status = 3 AND NOT w.first THEN w.first_payload IS DISTINCT FROM w.payload
				ELSE false
			END AS mismatch
		FROM w
	), bad AS MATERIALIZED (
		SELECT EXISTS (SELECT FROM s WHERE s.mismatch) AS any
	), k AS MATERIALIZED (
		SELECT s.dom, s.key, s.off, s.payload, row_number() OVER (PARTITION BY s.dom ORDER BY s.i) AS k,
			count(*) OVER (PARTITION BY s.dom) AS n, s.front_pos, s.back_pos
		FROM s WHERE s.fresh AND NOT (SELECT bad.any FROM bad)
	), queued AS (
		INSERT INTO {{schema}}.backlog (domain, off, pos)
		SELECT k.dom, k.off, CASE WHEN p.lifo THEN k.front_pos - k.k ELSE k.back_pos + k.k - 1 END FROM k
	), stored AS (
		INSERT INTO {{schema}}.payloads (domain, off, payload)
		SELECT k.dom, k.off, k.payload FROM k WHERE k.payload IS NOT NULL
		ON CONFLICT (key, off) DO NOTHING
	), counted AS (
		UPDATE {{schema}}.domains x
		SET back_pos = CASE WHEN p.lifo THEN x.back_pos ELSE x.back_pos + k.n END,
			front_pos = CASE WHEN p.lifo THEN x.front_pos - k.n ELSE x.front_pos END,
			queued = x.queued + k.n, counts[2] = x.counts[2] + k.n,
			ready_at = CASE WHEN x.lease_off IS NULL AND NOT x.paused THEN coalesce(x.ready_at, p_now) ELSE x.ready_at END
		FROM k WHERE x.key = k.key AND x.domain = k.dom AND k.k = 1
		RETURNING x.domain, x.queued = k.n AND x.ready_at IS NOT NULL AS became
	), notified AS (
		-- The domains that became ready: idle and running, with nothing
		-- queued before.
		SELECT {{schema}}._notify_ready(p_now, array_agg(c.domain)) FROM counted c WHERE c.became HAVING count(*) > 0
	), unrevived AS (
		-- A refused batch leaves no domain behind.
		UPDATE {{schema}}.domains x SET forgotten = true
		WHERE (SELECT bad.any FROM bad) AND x.key = ANY (dom_keys) AND x.domain = ANY (revived)
	), uncreated AS (
		DELETE FROM {{schema}}.domains x WHERE (SELECT bad.any FROM bad) AND x.key = ANY (dom_keys) AND x.domain = ANY (created)
	)
	SELECT s.i, ROW(CASE WHEN s.mismatch THEN 0::smallint ELSE s.status END, CASE WHEN s.mismatch THEN 11 ELSE 0 END::smallint,
		NULL, 0, NULL, NULL, 0, s.serial, 0, 0, NULL, NULL, false,
		CASE WHEN s.fresh THEN ARRAY[2::smallint] END, CASE WHEN s.fresh THEN ARRAY[s.off] END,
		CASE WHEN s.fresh THEN ARRAY[0] END, CASE WHEN s.fresh THEN ARRAY[0::bigint] END,
		CASE WHEN s.fresh THEN ARRAY[0::smallint] END, p_now)::{{schema}}.answer
	-- notified runs only if the query reads it: a join whose columns
	-- nothing reads would be left out.
	FROM s, (SELECT count(*) AS c FROM notified) n WHERE n.c >= 0;
END $$;

-- succeed is Succeed, and SucceedNext if p_next is set: SucceedNext grants
-- the head only if it is due.
CREATE OR REPLACE FUNCTION {{schema}}.succeed(p_domain bytea, p_fence bigint, p_serial bigint, p_same bool, p_next bool,
	p_now timestamptz, p {{schema}}.policy)
RETURNS {{schema}}.answer
LANGUAGE plpgsql AS $$
DECLARE
	c record;
	d {{schema}}.domains;
	evs {{schema}}.event[];
	h bigint;
	st smallint;
BEGIN
	p_now := coalesce(p_now, clock_timestamp());
	SELECT * INTO c FROM {{schema}}._holder(p_domain, p_fence, p_serial, p_same, p_now, p);
	IF c.d IS NULL THEN
		RETURN {{schema}}._absent();
	END IF;
	d := c.d;
	evs := c.evs;
	IF c.e <> 0 THEN
		RETURN {{schema}}._finish(p_domain, 0::smallint, c.e, NULL, 0, evs, p_now);
	END IF;
	evs := evs || ROW(3, d.lease_off, d.lease_attempts, d.fence, 0)::{{schema}}.event;
	PERFORM {{schema}}._terminal(p_domain, d.lease_off, true, p.monotonic);
	PERFORM {{schema}}._release(p_domain);
	h := {{schema}}._head(p_domain);
	IF h IS NULL THEN
		st := 1;
	ELSIF p_next AND NOT d.paused AND {{schema}}._due(p_domain, h, p_now) THEN
		evs := evs || {{schema}}._grant(p_domain, h, p_now, p);
		st := 3;
		h := NULL;
	ELSE
		st := 2;
	END IF;
	RETURN {{schema}}._finish(p_domain, st, 0::smallint, h, 0, evs, p_now);
END $$;

-- fail is Fail, and FailNext if p_next is set: FailNext grants the head
-- only if it is due.
CREATE OR REPLACE FUNCTION {{schema}}.fail(p_domain bytea, p_fence bigint, p_serial bigint, p_same bool, p_cause bytea, p_next bool,
	p_now timestamptz, p {{schema}}.policy)
RETURNS {{schema}}.answer
LANGUAGE plpgsql AS $$
DECLARE
	k bytea := {{schema}}._key(p_domain);
	c record;
	d {{schema}}.domains;
	evs {{schema}}.event[];
	h bigint;
	st smallint;
	exp timestamptz;
	paused bool;
BEGIN
	p_now := coalesce(p_now, clock_timestamp());
	SELECT * INTO c FROM {{schema}}._holder(p_domain, p_fence, p_serial, p_same, p_now, p);
	IF c.d IS NULL THEN
		RETURN {{schema}}._absent();
	END IF;
	d := c.d;
	evs := c.evs;
	IF c.e <> 0 THEN
		RETURN {{schema}}._finish(p_domain, 0::smallint, c.e, NULL, 0, evs, p_now);
	END IF;
	IF d.lease_retries < p.max_retries THEN
		-- acquired_at stays: it marks the offset's first grant. The next
		-- attempt gets at least a full TTL.
		exp := d.lease_expires_at;
		IF p.ttl IS NOT NULL THEN
			exp := greatest(exp, p_now + p.ttl);
		END IF;
		UPDATE {{schema}}.domains x
		SET lease_retries = x.lease_retries + 1, lease_attempts = x.lease_attempts + 1, lease_expires_at = exp
		WHERE x.key = k AND x.domain = p_domain;
		evs := evs || ROW(4, d.lease_off, d.lease_retries + 1, d.fence, 2)::{{schema}}.event;
		RETURN {{schema}}._finish(p_domain, 1::smallint, 0::smallint, NULL, d.lease_retries + 1, evs, p_now);
	END IF;
	evs := evs || {{schema}}._dead_letter(p_domain, d.lease_off, d.lease_attempts, d.fence, 2::smallint, p_cause, p_now, p.park, p.monotonic);
	SELECT x.paused INTO paused FROM {{schema}}.domains x WHERE x.key = k AND x.domain = p_domain;
	h := {{schema}}._head(p_domain);
	IF paused THEN
		st := 4;
		h := NULL;
	ELSIF h IS NULL THEN
		st := 2;
	ELSIF p_next AND {{schema}}._due(p_domain, h, p_now) THEN
		evs := evs || {{schema}}._grant(p_domain, h, p_now, p);
		st := 5;
		h := NULL;
	ELSE
		st := 3;
	END IF;
	RETURN {{schema}}._finish(p_domain, st, 0::smallint, h, d.lease_retries, evs, p_now);
END $$;

-- _finish ends a call on domain: it counts the call's events and returns
-- its answer, whose head is the offset the domain grants next, if it is
-- idle, running and its head is due. A domain that becomes ready with a
-- head scheduled for later is ready at that time (as the contract's
-- model has it).
CREATE OR REPLACE FUNCTION {{schema}}._finish(p_domain bytea, p_status smallint, p_err smallint, p_hint bigint, p_retry_count int,
	evs {{schema}}.event[], p_now timestamptz) RETURNS {{schema}}.answer
LANGUAGE plpgsql AS $$
DECLARE
	k bytea := {{schema}}._key(p_domain);
	d {{schema}}.domains;
	a {{schema}}.answer;
	changed bool;
	h record;
BEGIN
	PERFORM {{schema}}._count(p_domain, evs);
	SELECT b.off, b.not_before INTO h FROM {{schema}}.backlog b WHERE b.key = k AND b.domain = p_domain ORDER BY b.pos LIMIT 1;
	-- A domain that stays ready keeps its place, unless its head is now
	-- scheduled later than it (then it is ready at that time) or earlier
	-- than the time it waits for (then from the later of now and that).
	UPDATE {{schema}}.domains x SET ready_at = r.at
	FROM (SELECT CASE WHEN y.lease_off IS NULL AND y.queued > 0 AND NOT y.paused THEN
			CASE
				WHEN y.ready_at IS NULL THEN greatest(p_now, h.not_before)
				WHEN h.not_before > y.ready_at THEN h.not_before
				WHEN y.ready_at > p_now AND h.not_before < y.ready_at THEN greatest(p_now, h.not_before)
				ELSE y.ready_at
			END END AS at
		FROM {{schema}}.domains y WHERE y.key = k AND y.domain = p_domain) r
	WHERE x.key = k AND x.domain = p_domain AND x.ready_at IS DISTINCT FROM r.at;
	changed := FOUND;
	SELECT * INTO d FROM {{schema}}.domains x WHERE x.key = k AND x.domain = p_domain;
	IF changed AND d.ready_at IS NOT NULL THEN -- it became ready
		PERFORM {{schema}}._notify_ready(p_now, ARRAY[p_domain]);
	END IF;
	a.status := p_status;
	a.err := p_err;
	a.hint := p_hint;
	a.retry_count := p_retry_count;
	IF d.lease_off IS NULL AND NOT d.paused AND (h.not_before IS NULL OR h.not_before <= p_now) THEN
		a.head := h.off;
	END IF;
	a.lease_off := d.lease_off;
	a.fence := d.fence;
	a.serial := d.serial;
	a.attempts := d.lease_attempts;
	a.retries := d.lease_retries;
	a.acquired_at := d.lease_acquired_at;
	a.expires_at := d.lease_expires_at;
	a.paused := d.paused;
	a.at := p_now;
	SELECT array_agg(e.kind ORDER BY e.i), array_agg(e.off ORDER BY e.i), array_agg(e.attempt ORDER BY e.i),
		array_agg(e.fence ORDER BY e.i), array_agg(e.why ORDER BY e.i)
	INTO a.ev_kinds, a.ev_offs, a.ev_attempts, a.ev_fences, a.ev_whys
	FROM unnest(evs) WITH ORDINALITY AS e(kind, off, attempt, fence, why, i);
	RETURN a;
END $$;

-- claim is Claim when a lease is due: it takes over up to p_limit domains
-- whose lease is due (their rows carry no offset, only the expiry's
-- events), then leases the heads of up to p_limit ready domains, highest
-- priority first, then the longest waiting, skipping domains another call
-- holds. It grants no head scheduled for later.
CREATE OR REPLACE FUNCTION {{schema}}.claim(p_limit int, p_now timestamptz, p {{schema}}.policy)
RETURNS TABLE (domain bytea, off bigint, payload bytea, a {{schema}}.answer)
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $$
DECLARE
	dom bytea;
	doms bytea[];
	evs {{schema}}.event[];
BEGIN
	p_now := coalesce(p_now, clock_timestamp());
	FOR dom IN SELECT x.domain FROM {{schema}}.domains x WHERE x.lease_expires_at <= p_now
		ORDER BY x.lease_expires_at LIMIT p_limit FOR UPDATE SKIP LOCKED
	LOOP
		evs := {{schema}}._expire(dom, p_now, p);
		CONTINUE WHEN cardinality(evs) = 0;
		domain := dom;
		off := NULL;
		payload := NULL;
		a := {{schema}}._finish(dom, 0::smallint, 0::smallint, NULL, 0, evs, p_now);
		RETURN NEXT;
	END LOOP;
	-- Lock the ready domains first, and read their heads in the next
	-- statement, whose snapshot comes after the locks: one statement that
	-- did both would read heads as they were before the locks.
	SELECT array_agg(r.domain) INTO doms FROM (
		SELECT x.domain FROM {{schema}}.domains x WHERE x.ready_at <= p_now
		ORDER BY x.priority DESC, x.ready_at LIMIT p_limit FOR UPDATE SKIP LOCKED) r;
	IF doms IS NULL THEN
		RETURN;
	END IF;
	RETURN QUERY
	WITH h AS (
		SELECT r.dom, {{schema}}._key(r.dom) AS k, b.off, b.not_before FROM unnest(doms) AS r(dom),
			LATERAL (SELECT y.off, y.not_before FROM {{schema}}.backlog y
				WHERE y.key = {{schema}}._key(r.dom) AND y.domain = r.dom
				ORDER BY y.pos LIMIT 1) b
	), later AS (
		-- A head scheduled for later: the domain is ready then.
		UPDATE {{schema}}.domains x SET ready_at = h.not_before
		FROM h WHERE h.not_before > p_now AND x.key = h.k AND x.domain = h.dom
	), taken AS (
		DELETE FROM {{schema}}.backlog y USING h
		WHERE (h.not_before IS NULL OR h.not_before <= p_now) AND y.key = h.k AND y.domain = h.dom AND y.off = h.off
		RETURNING y.domain AS dom, y.key AS k, y.off, y.carried_attempts, y.carried_retries, y.carried_acquired_at
	), g AS (
		UPDATE {{schema}}.domains x
		SET fence = greatest(x.fence, {{schema}}.fence_floor()) + 1, lease_off = t.off, lease_attempts = coalesce(t.carried_attempts, 0) + 1,
			lease_retries = coalesce(t.carried_retries, 0), lease_acquired_at = coalesce(t.carried_acquired_at, p_now),
			lease_expires_at = p_now + p.ttl, queued = x.queued - 1, ready_at = NULL,
			lease_payload = EXISTS (SELECT FROM {{schema}}.payloads y WHERE y.key = t.k AND y.domain = t.dom AND y.off = t.off),
			counts[1] = x.counts[1] + 1
		FROM taken t WHERE x.key = t.k AND x.domain = t.dom
		RETURNING x.*
	)
	SELECT g.domain, g.lease_off, y.payload,
		ROW(1, 0, NULL, 0, NULL, g.lease_off, g.fence, g.serial, g.lease_attempts, g.lease_retries,
			g.lease_acquired_at, g.lease_expires_at, g.paused, ARRAY[1::smallint], ARRAY[g.lease_off],
			ARRAY[g.lease_attempts], ARRAY[g.fence], ARRAY[0::smallint], p_now)::{{schema}}.answer
	FROM g LEFT JOIN {{schema}}.payloads y ON y.key = g.key AND y.domain = g.domain AND y.off = g.lease_off
	ORDER BY array_position(doms, g.domain);
END $$;

-- _end_delay makes domain ready if it waits for a delay to end and its
-- backlog's head is no longer p_head: at p_now, or when its new head is
-- due. It tells waiting claims.
CREATE OR REPLACE FUNCTION {{schema}}._end_delay(p_domain bytea, p_head bigint, p_now timestamptz) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
	k bytea := {{schema}}._key(p_domain);
	h record;
BEGIN
	SELECT b.off, b.not_before INTO h FROM {{schema}}.backlog b WHERE b.key = k AND b.domain = p_domain ORDER BY b.pos LIMIT 1;
	UPDATE {{schema}}.domains x SET ready_at = greatest(p_now, h.not_before)
	WHERE x.key = k AND x.domain = p_domain AND x.ready_at > p_now AND h.off IS DISTINCT FROM p_head;
	IF FOUND THEN
		PERFORM {{schema}}._notify_ready(p_now, ARRAY[p_domain]);
	END IF;
END $$;
