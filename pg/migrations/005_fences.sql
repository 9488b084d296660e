-- Fences that never repeat, even when a failover loses commits.
--
-- With asynchronous replication, a standby promoted to primary may lack
-- the last commits the old primary acknowledged: the grants among them
-- roll back, a domain's fence goes back with them, and the next grant
-- would hand out a fence a previous holder already used against the
-- user's storage. A promotion always starts a new timeline, whose number
-- is above every timeline before it, and the timeline of the server's
-- write-ahead log is never rolled back. So every grant takes its fence
-- above fence_floor, the current timeline's floor: (timeline - 1) * 2^40.
-- On the first timeline the floor is 0, and fences go 1, 2, 3 as before;
-- the first grant of a domain after a promotion jumps to the new floor,
-- above every fence of the timelines before (as long as no domain took
-- 2^40 grants in one timeline).
--
-- pg_walfile_name(pg_current_wal_lsn()) names the file of the current
-- write-ahead log position, whose first 8 hex digits are the timeline
-- the server writes on now: pg_control_checkpoint()'s timeline lags
-- until the checkpoint after the promotion. Both functions refuse to run
-- on a server in recovery, where no grant can be written either. The
-- multiplication, unlike a shift, fails rather than wraps past the
-- largest bigint (timeline 8,388,609). The function is plain SQL, which
-- the planner inlines into the statements that call it.
CREATE FUNCTION {{schema}}.fence_floor() RETURNS bigint
LANGUAGE sql VOLATILE AS $$
	SELECT (('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::bigint - 1) * 1099511627776
$$;

-- rebase_fences raises the floor above every fence the domains hold, by
-- creating fence_floor again with a number of timelines added to the
-- current one: for a cluster whose timeline started again at 1 while its
-- domains kept fences of a later one (pg_upgrade, a restored dump), where
-- a promotion that lost commits would otherwise raise the floor to no
-- fence above them. The domains' next grants jump above it. It returns the
-- new floor. Only the schema's owner may run it.
CREATE FUNCTION {{schema}}.rebase_fences() RETURNS bigint
LANGUAGE plpgsql AS $rebase$
DECLARE
	tl bigint := ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::bigint;
	top bigint; -- the highest fence's timeline, counted from 0
	added bigint;
BEGIN
	SELECT coalesce(max(fence), 0) / 1099511627776 INTO top FROM {{schema}}.domains;
	added := greatest(top + 1 - (tl - 1), 0);
	EXECUTE format($f$CREATE OR REPLACE FUNCTION %s.fence_floor() RETURNS bigint
LANGUAGE sql VOLATILE AS $b$
	SELECT (('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::bigint - 1 + %s) * 1099511627776
$b$$f$, '{{schema}}', added);
	RETURN (tl - 1 + added) * 1099511627776;
END $rebase$;

-- streak_from is the fence of the lease that ClaimNext ended as it
-- granted the lease under streak_fence: the grant's fence is no longer
-- always the one before plus one, and a repeated ClaimNext must still
-- find the lease it was answered with.
ALTER TABLE {{schema}}.domains ADD COLUMN streak_from bigint NOT NULL DEFAULT 0;

-- _grant is 001's, with its fence above the floor.
CREATE OR REPLACE FUNCTION {{schema}}._grant(p_domain bytea, p_off bigint, p_now timestamptz, p {{schema}}.policy)
RETURNS {{schema}}.event[]
LANGUAGE plpgsql AS $$
DECLARE
	ca int;
	cr int;
	cat timestamptz;
	f bigint;
	n int;
	was_queued bool;
BEGIN
	DELETE FROM {{schema}}.backlog WHERE domain = p_domain AND off = p_off
	RETURNING carried_attempts, carried_retries, carried_acquired_at INTO ca, cr, cat;
	was_queued := FOUND;
	n := coalesce(ca, 0) + 1;
	UPDATE {{schema}}.domains
	SET fence = greatest(fence, {{schema}}.fence_floor()) + 1, lease_off = p_off, lease_attempts = n,
		lease_retries = coalesce(cr, 0), lease_acquired_at = coalesce(cat, p_now), lease_expires_at = p_now + p.ttl,
		queued = queued - CASE WHEN was_queued THEN 1 ELSE 0 END,
		lease_payload = EXISTS (SELECT FROM {{schema}}.payloads x WHERE x.domain = p_domain AND x.off = p_off)
	WHERE domain = p_domain
	RETURNING fence INTO f;
	RETURN ARRAY[ROW(1, p_off, n, f, 0)::{{schema}}.event];
END $$;

-- claim is 001's, with its fences above the floor.
CREATE OR REPLACE FUNCTION {{schema}}.claim(p_limit int, p_now timestamptz, p {{schema}}.policy)
RETURNS TABLE (domain bytea, off bigint, payload bytea, a {{schema}}.answer)
LANGUAGE plpgsql AS $$
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
		SELECT r.dom, b.off FROM unnest(doms) AS r(dom),
			LATERAL (SELECT y.off FROM {{schema}}.backlog y WHERE y.domain = r.dom ORDER BY y.pos LIMIT 1) b
	), taken AS (
		DELETE FROM {{schema}}.backlog y USING h WHERE y.domain = h.dom AND y.off = h.off
		RETURNING y.domain AS dom, y.off, y.carried_attempts, y.carried_retries, y.carried_acquired_at
	), g AS (
		UPDATE {{schema}}.domains x
		SET fence = greatest(x.fence, {{schema}}.fence_floor()) + 1, lease_off = t.off,
			lease_attempts = coalesce(t.carried_attempts, 0) + 1,
			lease_retries = coalesce(t.carried_retries, 0), lease_acquired_at = coalesce(t.carried_acquired_at, p_now),
			lease_expires_at = p_now + p.ttl, queued = x.queued - 1, ready_at = NULL,
			lease_payload = EXISTS (SELECT FROM {{schema}}.payloads y WHERE y.domain = t.dom AND y.off = t.off),
			counts[1] = x.counts[1] + 1
		FROM taken t WHERE x.domain = t.dom
		RETURNING x.*
	)
	SELECT g.domain, g.lease_off, y.payload,
		ROW(1, 0, NULL, 0, NULL, g.lease_off, g.fence, g.serial, g.lease_attempts, g.lease_retries,
			g.lease_acquired_at, g.lease_expires_at, g.paused, ARRAY[1::smallint], ARRAY[g.lease_off],
			ARRAY[g.lease_attempts], ARRAY[g.fence], ARRAY[0::smallint], p_now)::{{schema}}.answer
	FROM g LEFT JOIN {{schema}}.payloads y ON y.domain = g.domain AND y.off = g.lease_off
	ORDER BY array_position(doms, g.domain);
END $$;
