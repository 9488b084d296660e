-- The payload flag of the lease the fast Succeed ended last, beside its
-- offset and attempts: the statement deletes the payload only if it had one.
ALTER TABLE {{schema}}.domains ADD COLUMN ended_payload bool;

-- streak counts the leases ClaimNext granted the domain in a row, the last
-- of them under streak_fence: a lease under another fence was granted
-- otherwise, and starts a new run. At MaxStreak the domain goes behind the
-- other ready domains instead.
ALTER TABLE {{schema}}.domains ADD COLUMN streak int NOT NULL DEFAULT 0,
	ADD COLUMN streak_fence bigint NOT NULL DEFAULT 0;

-- SucceedMany is a plain statement now (see fastpull.go); succeed_many
-- stays for processes of the previous version, during an upgrade.

-- _notify_ready asks whether another domain is ready through the index of
-- ready domains: a plan that expects to find one soon in the table may
-- otherwise read all of it, when none is.
CREATE OR REPLACE FUNCTION {{schema}}._notify_ready(p_now timestamptz, p_new bytea[]) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
	IF (SELECT true FROM {{schema}}.domains x WHERE x.ready_at <= p_now AND x.domain <> ALL (p_new)
		ORDER BY x.priority DESC, x.ready_at LIMIT 1) IS NULL THEN
		PERFORM pg_notify('worklease_ready', '{{schema}}');
	END IF;
END $$;

-- Batches in a few statements, whatever their size: enqueue_many does an
-- offer's work for all of its items at once, where it did the whole of an
-- offer's work for each in turn (a dozen statements an item).

-- enqueue_many is EnqueueMany: enqueue for each item, all in one
-- transaction. It creates the domains it does not know, locks them all in
-- the order of their names (so that batches that share domains lock them in
-- the same order and never deadlock), and then, in statements whose
-- snapshots come after the locks, decides each item and queues the new
-- ones, each domain's in the order given. A batch with a domain whose lease
-- is due goes item by item through try_acquire, which expires the lease
-- first. Rows come with each item's index, from 1, in no particular order.
CREATE OR REPLACE FUNCTION {{schema}}.enqueue_many(p_domains bytea[], p_offs bigint[], p_payloads bytea[],
	p_now timestamptz, p {{schema}}.policy)
RETURNS TABLE (i int, a {{schema}}.answer)
LANGUAGE plpgsql AS $$
DECLARE
	doms bytea[];
BEGIN
	p_now := coalesce(p_now, clock_timestamp());
	SELECT array_agg(DISTINCT u.dom ORDER BY u.dom) INTO doms FROM unnest(p_domains) AS u(dom);
	INSERT INTO {{schema}}.domains (domain, serial)
	SELECT u.dom, nextval('{{schema}}.domain_serial') FROM unnest(doms) AS u(dom)
	WHERE NOT EXISTS (SELECT FROM {{schema}}.domains x WHERE x.domain = u.dom)
	ORDER BY u.dom
	ON CONFLICT (domain) DO NOTHING;
	PERFORM FROM {{schema}}.domains x WHERE x.domain = ANY (doms) ORDER BY x.domain FOR UPDATE;
	UPDATE {{schema}}.domains x SET forgotten = false WHERE x.domain = ANY (doms) AND x.forgotten;
	IF EXISTS (SELECT FROM {{schema}}.domains x WHERE x.domain = ANY (doms) AND x.lease_expires_at <= p_now) THEN
		FOR i IN SELECT u.n FROM unnest(p_domains) WITH ORDINALITY AS u(dom, n) ORDER BY u.dom, u.n LOOP
			a := {{schema}}.try_acquire(p_domains[i], p_offs[i], p_now, p, false, p_payloads[i]);
			RETURN NEXT;
		END LOOP;
		RETURN;
	END IF;

	-- Each item's status (worklease.AcquireStatus), as try_acquire decides
	-- it, and whether it is new: Enqueued, neither queued already nor given
	-- earlier in the batch. New items take their places in their domain's
	-- line in the order given: at the back, or at the front with LIFO
	-- ordering, each in front of the one before it.
	RETURN QUERY
	WITH t AS (
		SELECT u.i::int AS i, u.dom, u.off, u.payload, d.serial, d.front_pos, d.back_pos, q.queued IS NOT NULL AS queued,
			CASE
				WHEN d.processed @> u.off::numeric AND NOT (p.monotonic
					AND (d.lease_off IS NOT DISTINCT FROM u.off OR f.dead IS NOT NULL OR q.queued IS NOT NULL)) THEN 4
				WHEN f.dead IS NOT NULL THEN 5
				WHEN d.lease_off = u.off THEN 2
				ELSE 3
			END::smallint AS status
		FROM unnest(p_domains, p_offs, p_payloads) WITH ORDINALITY AS u(dom, off, payload, i)
		JOIN {{schema}}.domains d ON d.domain = u.dom
		-- Probes of one row each (LIMIT 1 keeps them so, where EXISTS may
		-- become a scan of the whole table).
		LEFT JOIN LATERAL (SELECT true AS dead FROM {{schema}}.dead_letters x
			WHERE x.domain = u.dom AND x.off = u.off LIMIT 1) f ON true
		LEFT JOIN LATERAL (SELECT true AS queued FROM {{schema}}.backlog b
			WHERE b.domain = u.dom AND b.off = u.off LIMIT 1) q ON true
	), s AS MATERIALIZED (
		SELECT t.*, t.status = 3 AND NOT t.queued AND t.i = min(t.i) OVER (PARTITION BY t.dom, t.off) AS fresh
		FROM t
	), k AS MATERIALIZED (
		SELECT s.dom, s.off, s.payload, row_number() OVER (PARTITION BY s.dom ORDER BY s.i) AS k,
			count(*) OVER (PARTITION BY s.dom) AS n, s.front_pos, s.back_pos
		FROM s WHERE s.fresh
	), queued AS (
		INSERT INTO {{schema}}.backlog (domain, off, pos)
		SELECT k.dom, k.off, CASE WHEN p.lifo THEN k.front_pos - k.k ELSE k.back_pos + k.k - 1 END FROM k
	), stored AS (
		INSERT INTO {{schema}}.payloads (domain, off, payload)
		SELECT k.dom, k.off, k.payload FROM k WHERE k.payload IS NOT NULL
		ON CONFLICT (domain, off) DO NOTHING
	), counted AS (
		UPDATE {{schema}}.domains x
		SET back_pos = CASE WHEN p.lifo THEN x.back_pos ELSE x.back_pos + k.n END,
			front_pos = CASE WHEN p.lifo THEN x.front_pos - k.n ELSE x.front_pos END,
			queued = x.queued + k.n, counts[2] = x.counts[2] + k.n,
			ready_at = CASE WHEN x.lease_off IS NULL AND NOT x.paused THEN coalesce(x.ready_at, p_now) ELSE x.ready_at END
		FROM k WHERE x.domain = k.dom AND k.k = 1
		RETURNING x.domain, x.queued = k.n AND x.ready_at IS NOT NULL AS became
	), notified AS (
		-- The domains that became ready: idle and running, with nothing
		-- queued before.
		SELECT {{schema}}._notify_ready(p_now, array_agg(c.domain)) FROM counted c WHERE c.became HAVING count(*) > 0
	)
	SELECT s.i, ROW(s.status, 0, NULL, 0, NULL, NULL, 0, s.serial, 0, 0, NULL, NULL, false,
		CASE WHEN s.fresh THEN ARRAY[2::smallint] END, CASE WHEN s.fresh THEN ARRAY[s.off] END,
		CASE WHEN s.fresh THEN ARRAY[0] END, CASE WHEN s.fresh THEN ARRAY[0::bigint] END,
		CASE WHEN s.fresh THEN ARRAY[0::smallint] END, p_now)::{{schema}}.answer
	-- notified runs only if the query reads it: a join whose columns
	-- nothing reads would be left out.
	FROM s, (SELECT count(*) AS c FROM notified) n WHERE n.c >= 0;
END $$;
