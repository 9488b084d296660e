-- enqueue_many locks the domains of its batch in the statement that reads
-- them, and creates domains only when some are missing. 009's ran three
-- statements before it locked: the batch's distinct domains and their
-- keys, an INSERT that created nothing unless a domain was new, then the
-- lock; about a tenth of an EnqueueMany of 100 items to domains that are
-- there already, as producers' batches mostly are. Now one statement
-- locks the domains that are there, in order, and says whether any is
-- missing; only then are the distinct domains listed, the missing ones
-- created, and all locked again (those held already stay so).
--
-- A batch that creates a domain then waits, holding the others, for any
-- batch creating the same one. If that batch in turn waits for a domain
-- the first holds (one a third call created after its first statement
-- began, so that it did not lock it there), PostgreSQL breaks the
-- deadlock by cancelling one, which EnqueueMany runs again. The rest of
-- the function is 009's.

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
	missing bool;
	done int[];
	answers {{schema}}.answer[];
BEGIN
	p_now := coalesce(p_now, clock_timestamp());
	-- One statement locks the domains in order and reads what the batch
	-- needs of them: how many there are, which were forgotten, and whether
	-- a lease is due. Only a batch with a domain that is not there yet
	-- creates it, and locks them all again.
	SELECT count(*) < (SELECT count(DISTINCT u.dom) FROM unnest(p_domains) AS u(dom)), array_agg(l.domain) FILTER (WHERE l.forgotten),
		coalesce(bool_or(l.lease_expires_at <= p_now), false)
	INTO missing, revived, due
	FROM (SELECT x.domain, x.forgotten, x.lease_expires_at FROM {{schema}}.domains x
		WHERE x.key = ANY (ARRAY(SELECT {{schema}}._key(u.dom) FROM unnest(p_domains) AS u(dom)))
			AND x.domain = ANY (p_domains) ORDER BY x.domain FOR UPDATE) l;
	IF missing THEN
		SELECT array_agg(u.dom ORDER BY u.dom), array_agg({{schema}}._key(u.dom) ORDER BY u.dom) INTO doms, dom_keys
		FROM (SELECT DISTINCT v.dom FROM unnest(p_domains) AS v(dom)) u;
		WITH n AS (
			INSERT INTO {{schema}}.domains (domain, key, serial)
			SELECT u.dom, u.k, nextval('{{schema}}.domain_serial') FROM unnest(doms, dom_keys) AS u(dom, k)
			WHERE NOT EXISTS (SELECT FROM {{schema}}.domains x WHERE x.key = u.k AND x.domain = u.dom)
			ORDER BY u.dom
			ON CONFLICT (key) DO NOTHING
			RETURNING domain
		)
		SELECT array_agg(n.domain) INTO created FROM n;
		SELECT array_agg(l.domain) FILTER (WHERE l.forgotten), coalesce(bool_or(l.lease_expires_at <= p_now), false)
		INTO revived, due
		FROM (SELECT x.domain, x.forgotten, x.lease_expires_at FROM {{schema}}.domains x
			WHERE x.key = ANY (dom_keys) AND x.domain = ANY (doms) ORDER BY x.domain FOR UPDATE) l;
	ELSIF revived IS NOT NULL THEN
		dom_keys := ARRAY(SELECT {{schema}}._key(u.dom) FROM unnest(revived) AS u(dom));
	END IF;
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
