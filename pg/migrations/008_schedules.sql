-- Scheduled work and retry delays together. A domain whose head waits
-- out a retry's delay keeps waiting for it while its backlog gets other
-- heads in front (LIFO ordering), scheduled or not: it may be claimed from
-- the later of that delay's end and its head's schedule, as the in-memory
-- Manager has it. Before, ready_at alone kept the delay, and a call that
-- gave the domain a new head worked its place out from the head's
-- schedule alone: an earlier schedule cut the delay short, and a head
-- that was no longer scheduled ended it. So the domain row keeps the
-- delay, retry_at, with the fence of the lease whose Retry gave it,
-- retry_fence: the delay counts while the domain has granted no lease
-- since (every grant raises the fence, so no grant needs to clear it) and
-- has stayed ready. Kill, Cancel and Redrive, which give the backlog
-- another head, end it (see _end_delay), and so does a pause.
--
-- A call that gives an idle domain a new head also makes it ready from
-- now if nothing holds the new head back, where before a domain waiting
-- for its old head's schedule kept waiting (TryAcquire and EnqueueMany
-- with LIFO ordering).

ALTER TABLE {{schema}}.domains ADD COLUMN retry_at timestamptz, ADD COLUMN retry_fence bigint;

-- The delays retries gave before: a ready domain that waits past its
-- head's schedule waits for a retry's delay.
UPDATE {{schema}}.domains x SET retry_at = x.ready_at, retry_fence = x.fence
WHERE x.ready_at > now() AND x.ready_at > coalesce((SELECT b.not_before FROM {{schema}}.backlog b
	WHERE b.key = x.key AND b.domain = x.domain ORDER BY b.pos LIMIT 1), '-infinity');

-- retry is Retry: the holder's attempt failed, and the offset waits at
-- the front of its domain's line until p_delay has passed, for any worker
-- to claim; past its retries it is a dead letter with p_cause instead.
-- Status 1: retried; 2: dead-lettered. The delay is kept apart too, with
-- the lease's fence (see above).
CREATE OR REPLACE FUNCTION {{schema}}.retry(p_domain bytea, p_fence bigint, p_serial bigint, p_same bool, p_cause bytea,
	p_delay interval, p_now timestamptz, p {{schema}}.policy)
RETURNS {{schema}}.answer
LANGUAGE plpgsql AS $$
DECLARE
	c record;
	d {{schema}}.domains;
	evs {{schema}}.event[];
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
	IF d.lease_retries >= p.max_retries THEN
		evs := evs || {{schema}}._dead_letter(p_domain, d.lease_off, d.lease_attempts, d.fence, 2::smallint, p_cause, p_now,
			p.park, p.monotonic);
		RETURN {{schema}}._finish(p_domain, 2::smallint, 0::smallint, NULL, d.lease_retries + 1, evs, p_now);
	END IF;
	evs := evs || ROW(4, d.lease_off, d.lease_retries + 1, d.fence, 2)::{{schema}}.event;
	PERFORM {{schema}}._release(p_domain);
	PERFORM {{schema}}._push(p_domain, d.lease_off, true, d.lease_attempts, d.lease_retries + 1, d.lease_acquired_at);
	evs := evs || ROW(7, d.lease_off, d.lease_attempts, 0, 0)::{{schema}}.event;
	UPDATE {{schema}}.domains x
	SET ready_at = p_now + p_delay,
		retry_at = CASE WHEN p_delay > interval '0' THEN p_now + p_delay END,
		retry_fence = CASE WHEN p_delay > interval '0' THEN x.fence END
	WHERE x.key = d.key AND x.domain = p_domain AND NOT x.paused;
	IF FOUND AND p_delay <= interval '0' THEN -- ready now, and _finish sees no change to announce
		PERFORM {{schema}}._notify_ready(p_now, ARRAY[p_domain]);
	END IF;
	RETURN {{schema}}._finish(p_domain, 1::smallint, 0::smallint, NULL, d.lease_retries + 1, evs, p_now);
END $$;

-- _finish ends a call on domain: it counts the call's events and returns
-- its answer, whose head is the offset the domain grants next, if it is
-- idle, running and its head is due. A domain that becomes ready is ready
-- from now, or from when its head's schedule ends if that is later. One
-- that stays ready keeps its place unless what holds it back changed: the
-- later of its head's schedule and its retry's delay (see above), due. It
-- is then ready at due if that is after the time it has, or, if it waits
-- and due is earlier, from the later of now and due. A domain that stops
-- being ready ends its retry's delay.
CREATE OR REPLACE FUNCTION {{schema}}._finish(p_domain bytea, p_status smallint, p_err smallint, p_hint bigint, p_retry_count int,
	evs {{schema}}.event[], p_now timestamptz) RETURNS {{schema}}.answer
LANGUAGE plpgsql AS $$
DECLARE
	k bytea := {{schema}}._key(p_domain);
	d {{schema}}.domains;
	a {{schema}}.answer;
	h record;
	due timestamptz;
	at timestamptz;
BEGIN
	PERFORM {{schema}}._count(p_domain, evs);
	SELECT b.off, b.not_before INTO h FROM {{schema}}.backlog b WHERE b.key = k AND b.domain = p_domain ORDER BY b.pos LIMIT 1;
	SELECT * INTO d FROM {{schema}}.domains x WHERE x.key = k AND x.domain = p_domain;
	IF d.lease_off IS NULL AND d.queued > 0 AND NOT d.paused THEN
		due := greatest(h.not_before, CASE WHEN d.ready_at IS NOT NULL AND d.retry_fence = d.fence THEN d.retry_at END);
		at := CASE
			WHEN d.ready_at IS NULL THEN greatest(p_now, due)
			WHEN due > d.ready_at THEN due
			WHEN d.ready_at > p_now AND coalesce(due, '-infinity') < d.ready_at THEN greatest(p_now, due)
			ELSE d.ready_at
		END;
	END IF;
	IF at IS DISTINCT FROM d.ready_at OR at IS NULL AND d.retry_fence IS NOT NULL THEN
		UPDATE {{schema}}.domains x
		SET ready_at = at, retry_at = CASE WHEN at IS NOT NULL THEN x.retry_at END, retry_fence = CASE WHEN at IS NOT NULL THEN x.retry_fence END
		WHERE x.key = k AND x.domain = p_domain;
		IF at IS NOT NULL AND at IS DISTINCT FROM d.ready_at THEN -- it became ready, or moved
			PERFORM {{schema}}._notify_ready(p_now, ARRAY[p_domain]);
		END IF;
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

-- _end_delay ends the delay domain waits for if its backlog's head is no
-- longer p_head, as Kill, Cancel and Redrive do: its retry's delay, which
-- was the old head's, and the old head's schedule. It is then ready at
-- p_now, or when its new head is due, and waiting claims are told.
CREATE OR REPLACE FUNCTION {{schema}}._end_delay(p_domain bytea, p_head bigint, p_now timestamptz) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
	k bytea := {{schema}}._key(p_domain);
	h record;
BEGIN
	SELECT b.off, b.not_before INTO h FROM {{schema}}.backlog b WHERE b.key = k AND b.domain = p_domain ORDER BY b.pos LIMIT 1;
	IF h.off IS NOT DISTINCT FROM p_head THEN
		RETURN;
	END IF;
	UPDATE {{schema}}.domains x SET retry_at = NULL, retry_fence = NULL
	WHERE x.key = k AND x.domain = p_domain AND x.retry_fence IS NOT NULL;
	UPDATE {{schema}}.domains x SET ready_at = greatest(p_now, h.not_before)
	WHERE x.key = k AND x.domain = p_domain AND x.ready_at > p_now AND x.ready_at IS DISTINCT FROM greatest(p_now, h.not_before);
	IF FOUND THEN
		PERFORM {{schema}}._notify_ready(p_now, ARRAY[p_domain]);
	END IF;
END $$;

-- _enqueue is Enqueue, and EnqueueAt with p_not_before, as before; a new
-- head that LIFO ordering puts in front gets its place from _finish.
CREATE OR REPLACE FUNCTION {{schema}}._enqueue(p_domain bytea, p_off bigint, p_payload bytea, p_not_before timestamptz,
	p_now timestamptz, p {{schema}}.policy)
RETURNS {{schema}}.answer
LANGUAGE plpgsql AS $$
DECLARE
	k bytea := {{schema}}._key(p_domain);
	d {{schema}}.domains;
	evs {{schema}}.event[];
	st smallint;
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
	PERFORM {{schema}}._push(p_domain, p_off, p.lifo, p_payload => p_payload);
	IF p_not_before > p_now THEN
		UPDATE {{schema}}.backlog b SET not_before = p_not_before WHERE b.key = k AND b.domain = p_domain AND b.off = p_off;
	END IF;
	evs := evs || ROW(2, p_off, 0, 0, 0)::{{schema}}.event;
	RETURN {{schema}}._finish(p_domain, 3::smallint, 0::smallint, NULL, 0, evs, p_now);
END $$;

-- append is Append, as before; a new head that LIFO ordering puts in
-- front gets its place from _finish.
CREATE OR REPLACE FUNCTION {{schema}}.append(p_domain bytea, p_payload bytea, p_ikey bytea, p_window interval,
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
	PERFORM {{schema}}._push(p_domain, next::bigint, p.lifo, p_payload => p_payload);
	IF p_not_before > p_now THEN
		UPDATE {{schema}}.backlog b SET not_before = p_not_before WHERE b.key = k AND b.domain = p_domain AND b.off = next::bigint;
	END IF;
	evs := evs || ROW(2, next::bigint, 0, 0, 0)::{{schema}}.event;
	IF p_ikey IS NOT NULL THEN
		INSERT INTO {{schema}}.append_keys AS y (domain, ikey, off, sum, at)
		VALUES (p_domain, p_ikey, next::bigint, sha256(p_payload), p_now)
		ON CONFLICT (key, ikey) DO UPDATE SET off = excluded.off, sum = excluded.sum, at = excluded.at;
	END IF;
	RETURN {{schema}}._finish(p_domain, 3::smallint, 0::smallint, next::bigint, 0, evs, p_now);
END $$;

-- enqueue_many is EnqueueMany, as before, but for the place of a domain
-- that LIFO ordering gives a new head.
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
			-- With LIFO ordering the batch gives the domain a new head,
			-- which has no schedule: only a retry's delay may hold it back.
			ready_at = CASE WHEN x.lease_off IS NULL AND NOT x.paused THEN
				CASE
					WHEN x.ready_at IS NULL THEN p_now
					WHEN p.lifo AND x.ready_at > p_now THEN greatest(p_now, CASE WHEN x.retry_fence = x.fence THEN x.retry_at END)
					ELSE x.ready_at
				END ELSE x.ready_at END
		FROM k WHERE x.key = k.key AND x.domain = k.dom AND k.k = 1
		RETURNING x.domain, x.ready_at = p_now AND (x.queued = k.n OR p.lifo) AS became
	), notified AS (
		-- The domains that became ready: idle and running, with nothing
		-- queued before, or with a new head that need not wait.
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
