-- Every domain the contract accepts, 1 to 4,096 arbitrary bytes: a btree
-- entry holds at most 2,704 bytes (a third of a page), so a long domain
-- that does not compress could not be in an index of domains. Each table
-- now finds a domain by its key, which fits: the domain itself if it is
-- at most 1,024 bytes long, else its first 1,024 bytes followed by its
-- SHA-256 (1,056 bytes, so that no short domain is another's key). The key
-- is a generated column, so that the statements that insert rows are
-- unchanged, and it takes the domain's place in every primary key and
-- index. Every lookup matches the key, through the index, and the domain
-- itself: two long domains whose keys collided would never share a row,
-- the second one's creation would fail instead.
--
-- The indexes, and so the listings, order domains by key: by their bytes,
-- except that domains longer than 1,024 bytes that share their first 1,024
-- are ordered by their SHA-256 among themselves.
--
-- Adding the columns rewrites the tables, and the indexes are built again:
-- writes wait for as long as that takes. The functions below are those of
-- the earlier migrations with their lookups by key; the plain statements
-- of a process of an earlier version still running read the tables without
-- an index until the process is replaced.

-- _key is a domain's key.
CREATE FUNCTION {{schema}}._key(p_domain bytea) RETURNS bytea
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
	SELECT CASE WHEN length(p_domain) <= 1024 THEN p_domain ELSE substr(p_domain, 1, 1024) || sha256(p_domain) END
$$;

ALTER TABLE {{schema}}.domains ADD COLUMN key bytea GENERATED ALWAYS AS ({{schema}}._key(domain)) STORED;
ALTER TABLE {{schema}}.domains DROP CONSTRAINT domains_pkey, ADD PRIMARY KEY (key);
DROP INDEX {{schema}}.domains_paused, {{schema}}.domains_dead;
CREATE INDEX domains_paused ON {{schema}}.domains (key) WHERE paused;
CREATE INDEX domains_dead ON {{schema}}.domains (key) WHERE failed > 0;

ALTER TABLE {{schema}}.backlog ADD COLUMN key bytea GENERATED ALWAYS AS ({{schema}}._key(domain)) STORED;
ALTER TABLE {{schema}}.backlog DROP CONSTRAINT backlog_pkey, ADD PRIMARY KEY (key, off);
DROP INDEX {{schema}}.backlog_order;
CREATE UNIQUE INDEX backlog_order ON {{schema}}.backlog (key, pos);

ALTER TABLE {{schema}}.payloads ADD COLUMN key bytea GENERATED ALWAYS AS ({{schema}}._key(domain)) STORED;
ALTER TABLE {{schema}}.payloads DROP CONSTRAINT payloads_pkey, ADD PRIMARY KEY (key, off);

ALTER TABLE {{schema}}.dead_letters ADD COLUMN key bytea GENERATED ALWAYS AS ({{schema}}._key(domain)) STORED;
ALTER TABLE {{schema}}.dead_letters DROP CONSTRAINT dead_letters_pkey, ADD PRIMARY KEY (key, off);
DROP INDEX {{schema}}.dead_letters_at;
CREATE INDEX dead_letters_at ON {{schema}}.dead_letters (at, key, off);

-- _lock locks and returns domain's row, creating it if create is set. A
-- forgotten domain is absent unless created again, keeping its fence.
CREATE OR REPLACE FUNCTION {{schema}}._lock(p_domain bytea, p_create bool) RETURNS {{schema}}.domains
LANGUAGE plpgsql AS $$
DECLARE
	d {{schema}}.domains;
	k bytea := {{schema}}._key(p_domain);
BEGIN
	SELECT * INTO d FROM {{schema}}.domains x WHERE x.key = k AND x.domain = p_domain FOR UPDATE;
	IF NOT FOUND AND p_create THEN
		INSERT INTO {{schema}}.domains (domain, serial) VALUES (p_domain, nextval('{{schema}}.domain_serial'))
		ON CONFLICT (key) DO NOTHING;
		SELECT * INTO d FROM {{schema}}.domains x WHERE x.key = k AND x.domain = p_domain FOR UPDATE;
		IF NOT FOUND THEN
			RAISE EXCEPTION 'worklease: a domain of % bytes has the key of another', length(p_domain);
		END IF;
	END IF;
	IF d.forgotten THEN
		IF NOT p_create THEN
			RETURN NULL;
		END IF;
		UPDATE {{schema}}.domains x SET forgotten = false WHERE x.key = k AND x.domain = p_domain RETURNING * INTO d;
	END IF;
	RETURN d;
END $$;

-- _processed reports whether off counts as processed in d.
CREATE OR REPLACE FUNCTION {{schema}}._processed(d {{schema}}.domains, p_off bigint, p_monotonic bool) RETURNS bool
LANGUAGE plpgsql STABLE AS $$
BEGIN
	IF NOT d.processed @> p_off::numeric THEN
		RETURN false;
	END IF;
	IF NOT p_monotonic THEN
		RETURN true;
	END IF;
	-- The run [0, hw] holds the offsets below hw still to run, or failed.
	RETURN d.lease_off IS DISTINCT FROM p_off
		AND NOT EXISTS (SELECT FROM {{schema}}.dead_letters x WHERE x.key = d.key AND x.domain = d.domain AND x.off = p_off)
		AND NOT EXISTS (SELECT FROM {{schema}}.backlog b WHERE b.key = d.key AND b.domain = d.domain AND b.off = p_off);
END $$;

-- _terminal records that off of domain reached a terminal state.
CREATE OR REPLACE FUNCTION {{schema}}._terminal(p_domain bytea, p_off bigint, p_succeeded bool, p_monotonic bool) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
	k bytea := {{schema}}._key(p_domain);
BEGIN
	IF p_monotonic THEN
		UPDATE {{schema}}.domains x
		SET processed = nummultirange(numrange(0, greatest(coalesce(upper(x.processed), 0), p_off::numeric + 1)))
		WHERE x.key = k AND x.domain = p_domain;
	ELSIF p_succeeded THEN
		UPDATE {{schema}}.domains x
		SET processed = x.processed + nummultirange(numrange(p_off, p_off::numeric + 1))
		WHERE x.key = k AND x.domain = p_domain;
	END IF;
	IF p_succeeded THEN
		DELETE FROM {{schema}}.payloads y WHERE y.key = k AND y.domain = p_domain AND y.off = p_off;
	END IF;
END $$;

-- _push queues off in domain, at the front or the back, with its payload
-- if it has one, unless it is queued already, and reports whether it was
-- added.
CREATE OR REPLACE FUNCTION {{schema}}._push(p_domain bytea, p_off bigint, p_front bool,
	p_attempts int DEFAULT NULL, p_retries int DEFAULT NULL, p_acquired_at timestamptz DEFAULT NULL,
	p_payload bytea DEFAULT NULL) RETURNS bool
LANGUAGE plpgsql AS $$
DECLARE
	k bytea := {{schema}}._key(p_domain);
	p bigint;
BEGIN
	IF EXISTS (SELECT FROM {{schema}}.backlog b WHERE b.key = k AND b.domain = p_domain AND b.off = p_off) THEN
		RETURN false;
	END IF;
	IF p_front THEN
		UPDATE {{schema}}.domains x SET front_pos = x.front_pos - 1, queued = x.queued + 1
		WHERE x.key = k AND x.domain = p_domain RETURNING x.front_pos INTO p;
	ELSE
		UPDATE {{schema}}.domains x SET back_pos = x.back_pos + 1, queued = x.queued + 1
		WHERE x.key = k AND x.domain = p_domain RETURNING x.back_pos - 1 INTO p;
	END IF;
	INSERT INTO {{schema}}.backlog (domain, off, pos, carried_attempts, carried_retries, carried_acquired_at)
	VALUES (p_domain, p_off, p, p_attempts, p_retries, p_acquired_at);
	IF p_payload IS NOT NULL THEN
		INSERT INTO {{schema}}.payloads (domain, off, payload) VALUES (p_domain, p_off, p_payload)
		ON CONFLICT (key, off) DO NOTHING;
	END IF;
	RETURN true;
END $$;

-- _head returns the backlog's head, or NULL.
CREATE OR REPLACE FUNCTION {{schema}}._head(p_domain bytea) RETURNS bigint
LANGUAGE sql STABLE AS $$
	SELECT b.off FROM {{schema}}.backlog b
	WHERE b.key = {{schema}}._key(p_domain) AND b.domain = p_domain
	ORDER BY b.pos LIMIT 1
$$;

-- _release clears domain's lease.
CREATE OR REPLACE FUNCTION {{schema}}._release(p_domain bytea) RETURNS void
LANGUAGE sql AS $$
	UPDATE {{schema}}.domains x
	SET lease_off = NULL, lease_attempts = 0, lease_retries = 0, lease_acquired_at = NULL, lease_expires_at = NULL,
		lease_payload = false
	WHERE x.key = {{schema}}._key(p_domain) AND x.domain = p_domain
$$;

-- _revoke ends domain's lease, whose fence is p_fence, without its holder,
-- who learns why from then on: 1, it expired; 2, an operator took it.
CREATE OR REPLACE FUNCTION {{schema}}._revoke(p_domain bytea, p_fence bigint, p_why smallint) RETURNS void
LANGUAGE sql AS $$
	UPDATE {{schema}}.domains x
	SET lease_off = NULL, lease_attempts = 0, lease_retries = 0, lease_acquired_at = NULL, lease_expires_at = NULL,
		lease_payload = false, revoked_fence = p_fence, revoked_why = p_why
	WHERE x.key = {{schema}}._key(p_domain) AND x.domain = p_domain
$$;

-- _dead_letter makes off failed after attempts attempts: a lease on it
-- ends, it leaves the backlog, and the domain is parked if park is set.
CREATE OR REPLACE FUNCTION {{schema}}._dead_letter(p_domain bytea, p_off bigint, p_attempts int, p_fence bigint,
	p_why smallint, p_cause bytea, p_now timestamptz, p_park bool, p_monotonic bool) RETURNS {{schema}}.event[]
LANGUAGE plpgsql AS $$
DECLARE
	k bytea := {{schema}}._key(p_domain);
	evs {{schema}}.event[];
	was_paused bool;
BEGIN
	UPDATE {{schema}}.domains x
	SET lease_off = NULL, lease_attempts = 0, lease_retries = 0, lease_acquired_at = NULL, lease_expires_at = NULL,
		lease_payload = false
	WHERE x.key = k AND x.domain = p_domain AND x.lease_off = p_off;
	DELETE FROM {{schema}}.backlog b WHERE b.key = k AND b.domain = p_domain AND b.off = p_off;
	IF FOUND THEN
		UPDATE {{schema}}.domains x SET queued = x.queued - 1 WHERE x.key = k AND x.domain = p_domain;
	END IF;
	INSERT INTO {{schema}}.dead_letters (domain, off, why, cause, attempts, at)
	VALUES (p_domain, p_off, p_why, p_cause, p_attempts, p_now);
	UPDATE {{schema}}.domains x SET failed = x.failed + 1 WHERE x.key = k AND x.domain = p_domain;
	PERFORM {{schema}}._terminal(p_domain, p_off, false, p_monotonic);
	evs := ARRAY[ROW(5, p_off, p_attempts, p_fence, p_why)::{{schema}}.event];
	IF p_park THEN
		SELECT x.paused INTO was_paused FROM {{schema}}.domains x WHERE x.key = k AND x.domain = p_domain;
		IF NOT was_paused THEN
			UPDATE {{schema}}.domains x SET paused = true WHERE x.key = k AND x.domain = p_domain;
			evs := evs || ROW(14, p_off, 0, 0, p_why)::{{schema}}.event;
		END IF;
	END IF;
	RETURN evs;
END $$;

-- _expire revokes domain's lease if it has expired at now: the expiry
-- counts as a failed attempt; with retries left, the offset goes back to
-- the front of the line, and without, it is dead-lettered.
CREATE OR REPLACE FUNCTION {{schema}}._expire(p_domain bytea, p_now timestamptz, p {{schema}}.policy) RETURNS {{schema}}.event[]
LANGUAGE plpgsql AS $$
DECLARE
	d {{schema}}.domains;
	evs {{schema}}.event[];
BEGIN
	SELECT * INTO d FROM {{schema}}.domains x WHERE x.key = {{schema}}._key(p_domain) AND x.domain = p_domain;
	IF d.lease_off IS NULL OR d.lease_expires_at IS NULL OR p_now < d.lease_expires_at THEN
		RETURN '{}';
	END IF;
	evs := ARRAY[ROW(6, d.lease_off, d.lease_attempts, d.fence, 0)::{{schema}}.event];
	PERFORM {{schema}}._revoke(p_domain, d.fence, 1::smallint);
	IF d.lease_retries < p.max_retries THEN
		PERFORM {{schema}}._push(p_domain, d.lease_off, true, d.lease_attempts, d.lease_retries + 1, d.lease_acquired_at);
		evs := evs || ROW(7, d.lease_off, d.lease_attempts, 0, 0)::{{schema}}.event;
	ELSE
		evs := evs || {{schema}}._dead_letter(p_domain, d.lease_off, d.lease_attempts, d.fence, 1::smallint, NULL, p_now, p.park, p.monotonic);
	END IF;
	RETURN evs;
END $$;

-- _grant leases off under a new fence, carrying on the attempts it made
-- before, if any.
CREATE OR REPLACE FUNCTION {{schema}}._grant(p_domain bytea, p_off bigint, p_now timestamptz, p {{schema}}.policy) RETURNS {{schema}}.event[]
LANGUAGE plpgsql AS $$
DECLARE
	k bytea := {{schema}}._key(p_domain);
	ca int;
	cr int;
	cat timestamptz;
	f bigint;
	n int;
	was_queued bool;
BEGIN
	DELETE FROM {{schema}}.backlog b WHERE b.key = k AND b.domain = p_domain AND b.off = p_off
	RETURNING b.carried_attempts, b.carried_retries, b.carried_acquired_at INTO ca, cr, cat;
	was_queued := FOUND;
	n := coalesce(ca, 0) + 1;
	UPDATE {{schema}}.domains x
	SET fence = greatest(x.fence, {{schema}}.fence_floor()) + 1, lease_off = p_off, lease_attempts = n, lease_retries = coalesce(cr, 0),
		lease_acquired_at = coalesce(cat, p_now), lease_expires_at = p_now + p.ttl,
		queued = x.queued - CASE WHEN was_queued THEN 1 ELSE 0 END,
		lease_payload = EXISTS (SELECT FROM {{schema}}.payloads y WHERE y.key = k AND y.domain = p_domain AND y.off = p_off)
	WHERE x.key = k AND x.domain = p_domain
	RETURNING x.fence INTO f;
	RETURN ARRAY[ROW(1, p_off, n, f, 0)::{{schema}}.event];
END $$;

-- _count adds evs to domain's counts.
CREATE OR REPLACE FUNCTION {{schema}}._count(p_domain bytea, evs {{schema}}.event[]) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
	k bytea;
	c bigint[];
	e {{schema}}.event;
BEGIN
	IF cardinality(evs) = 0 THEN
		RETURN;
	END IF;
	k := {{schema}}._key(p_domain);
	SELECT x.counts INTO c FROM {{schema}}.domains x WHERE x.key = k AND x.domain = p_domain;
	FOREACH e IN ARRAY evs LOOP
		c[e.kind] := c[e.kind] + 1;
	END LOOP;
	UPDATE {{schema}}.domains x SET counts = c WHERE x.key = k AND x.domain = p_domain;
END $$;

-- _finish ends a call on domain: it counts the call's events and returns
-- its answer.
CREATE OR REPLACE FUNCTION {{schema}}._finish(p_domain bytea, p_status smallint, p_err smallint, p_hint bigint, p_retry_count int,
	evs {{schema}}.event[], p_now timestamptz) RETURNS {{schema}}.answer
LANGUAGE plpgsql AS $$
DECLARE
	k bytea := {{schema}}._key(p_domain);
	d {{schema}}.domains;
	a {{schema}}.answer;
	changed bool;
BEGIN
	PERFORM {{schema}}._count(p_domain, evs);
	UPDATE {{schema}}.domains x
	SET ready_at = CASE WHEN x.lease_off IS NULL AND x.queued > 0 AND NOT x.paused THEN coalesce(x.ready_at, p_now) END
	WHERE x.key = k AND x.domain = p_domain
		AND x.ready_at IS DISTINCT FROM CASE WHEN x.lease_off IS NULL AND x.queued > 0 AND NOT x.paused THEN coalesce(x.ready_at, p_now) END;
	changed := FOUND;
	SELECT * INTO d FROM {{schema}}.domains x WHERE x.key = k AND x.domain = p_domain;
	IF changed AND d.ready_at IS NOT NULL THEN -- it became ready
		PERFORM {{schema}}._notify_ready(p_now, ARRAY[p_domain]);
	END IF;
	a.status := p_status;
	a.err := p_err;
	a.hint := p_hint;
	a.retry_count := p_retry_count;
	IF d.lease_off IS NULL AND NOT d.paused THEN
		a.head := {{schema}}._head(p_domain);
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

-- try_acquire is TryAcquire, and Enqueue with p_grant unset: an offset
-- is queued, with p_payload, even on an idle domain. Statuses are
-- worklease.AcquireStatus.
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
	ELSIF d.lease_off IS NOT NULL OR d.paused OR NOT p_grant THEN
		st := 3;
		IF {{schema}}._push(p_domain, p_off, p.lifo, p_payload => p_payload) THEN
			evs := evs || ROW(2, p_off, 0, 0, 0)::{{schema}}.event;
		END IF;
	ELSE
		h := {{schema}}._head(p_domain);
		IF h IS NOT NULL AND h <> p_off AND NOT p.best_effort THEN
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

-- _open locks domain (creating it if p_create is set), expires its lease
-- if due, and returns the domain after that and the events so far; d is
-- NULL for an unknown domain. Every call's function begins so.
CREATE OR REPLACE FUNCTION {{schema}}._open(p_domain bytea, p_create bool, p_now timestamptz, p {{schema}}.policy,
	OUT d {{schema}}.domains, OUT evs {{schema}}.event[])
LANGUAGE plpgsql AS $$
BEGIN
	d := {{schema}}._lock(p_domain, p_create);
	IF d.domain IS NULL THEN
		d := NULL;
		RETURN;
	END IF;
	evs := {{schema}}._expire(p_domain, p_now, p);
	SELECT * INTO d FROM {{schema}}.domains x WHERE x.key = {{schema}}._key(p_domain) AND x.domain = p_domain;
END $$;

-- fail is Fail, and FailNext if p_next is set; p_cause is the cause's text
-- to keep in a dead letter, NULL for none. Statuses are
-- worklease.FailStatus.
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
	ELSIF p_next THEN
		evs := evs || {{schema}}._grant(p_domain, h, p_now, p);
		st := 5;
		h := NULL;
	ELSE
		st := 3;
	END IF;
	RETURN {{schema}}._finish(p_domain, st, 0::smallint, h, d.lease_retries, evs, p_now);
END $$;

-- extend is Extend: the lease expires no sooner than p_d from now. The
-- answer's expires_at is the lease's expiry, NULL if it never expires.
CREATE OR REPLACE FUNCTION {{schema}}.extend(p_domain bytea, p_fence bigint, p_serial bigint, p_same bool, p_d interval,
	p_now timestamptz, p {{schema}}.policy)
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
	IF c.e = 0 AND d.lease_expires_at IS NOT NULL AND p_now + p_d > d.lease_expires_at THEN
		UPDATE {{schema}}.domains x SET lease_expires_at = p_now + p_d WHERE x.key = d.key AND x.domain = p_domain;
		evs := evs || ROW(8, d.lease_off, d.lease_attempts, d.fence, 0)::{{schema}}.event;
	END IF;
	RETURN {{schema}}._finish(p_domain, 0::smallint, c.e, NULL, 0, evs, p_now);
END $$;

-- inspect is Inspect: it expires domain's lease if it is due, then
-- reports the domain, all in one transaction: the answer (absent for an
-- unknown domain), the backlog, front first, the number of offsets that
-- count as processed (at most 2^63-1) and the number of failed ones.
CREATE OR REPLACE FUNCTION {{schema}}.inspect(p_domain bytea, p_now timestamptz, p {{schema}}.policy,
	OUT backlog bigint[], OUT processed bigint, OUT failed bigint, OUT a {{schema}}.answer)
LANGUAGE plpgsql AS $$
DECLARE
	k bytea := {{schema}}._key(p_domain);
	d {{schema}}.domains;
BEGIN
	p_now := coalesce(p_now, clock_timestamp());
	backlog := '{}';
	processed := 0;
	failed := 0;
	d := {{schema}}._lock(p_domain, false);
	IF d.domain IS NULL THEN
		a := {{schema}}._absent();
		RETURN;
	END IF;
	a := {{schema}}._finish(p_domain, 0::smallint, 0::smallint, NULL, 0, {{schema}}._expire(p_domain, p_now, p), p_now);
	SELECT * INTO d FROM {{schema}}.domains x WHERE x.key = k AND x.domain = p_domain;
	SELECT coalesce(array_agg(b.off ORDER BY b.pos), '{}') INTO backlog FROM {{schema}}.backlog b
	WHERE b.key = k AND b.domain = p_domain;
	processed := least({{schema}}.processed_count(d, p.monotonic), 9223372036854775807)::bigint;
	SELECT count(*) INTO failed FROM {{schema}}.dead_letters x WHERE x.key = k AND x.domain = p_domain;
END $$;

-- processed_count is the number of offsets of d that count as processed
-- (see worklease.DomainInfo.Processed), as numeric: it can reach 2^63.
CREATE OR REPLACE FUNCTION {{schema}}.processed_count(d {{schema}}.domains, p_monotonic bool) RETURNS numeric
LANGUAGE plpgsql STABLE AS $$
DECLARE
	hw numeric;
BEGIN
	IF NOT p_monotonic THEN
		RETURN coalesce((SELECT sum(upper(r) - lower(r)) FROM unnest(d.processed) r), 0);
	END IF;
	IF isempty(d.processed) THEN
		RETURN 0;
	END IF;
	hw := upper(d.processed) - 1;
	RETURN hw + 1
		- (SELECT count(*) FROM {{schema}}.dead_letters x WHERE x.key = d.key AND x.domain = d.domain)
		- (SELECT count(*) FROM {{schema}}.backlog b WHERE b.key = d.key AND b.domain = d.domain AND b.off <= hw)
		- CASE WHEN d.lease_off <= hw THEN 1 ELSE 0 END;
END $$;

-- _kill_keeping_delay is Kill without ending a retry's delay (see kill);
-- p_create says whether an unknown domain is created (not with monotonic
-- offsets, where it has no offset to kill), and p_reason is the dead
-- letter's cause, NULL for none.
CREATE OR REPLACE FUNCTION {{schema}}._kill_keeping_delay(p_domain bytea, p_off bigint, p_reason bytea, p_create bool,
	p_now timestamptz, p {{schema}}.policy)
RETURNS {{schema}}.answer
LANGUAGE plpgsql AS $$
DECLARE
	k bytea := {{schema}}._key(p_domain);
	c record;
	d {{schema}}.domains;
	evs {{schema}}.event[];
	in_flight bool;
	is_queued bool;
	n int := 0;
	f bigint := 0;
	why smallint := CASE WHEN p_reason IS NULL THEN 0 ELSE 2 END;
BEGIN
	p_now := coalesce(p_now, clock_timestamp());
	SELECT * INTO c FROM {{schema}}._open(p_domain, p_create, p_now, p);
	IF c.d IS NULL THEN
		RETURN {{schema}}._absent();
	END IF;
	d := c.d;
	evs := c.evs;
	in_flight := d.lease_off IS NOT DISTINCT FROM p_off;
	is_queued := EXISTS (SELECT FROM {{schema}}.backlog b WHERE b.key = k AND b.domain = p_domain AND b.off = p_off);
	IF {{schema}}._processed(d, p_off, p.monotonic) THEN
		RETURN {{schema}}._finish(p_domain, 0::smallint, 7::smallint, NULL, 0, evs, p_now);
	END IF;
	IF EXISTS (SELECT FROM {{schema}}.dead_letters x WHERE x.key = k AND x.domain = p_domain AND x.off = p_off) THEN
		RETURN {{schema}}._finish(p_domain, 0::smallint, 0::smallint, NULL, 0, evs, p_now);
	END IF;
	IF p.monotonic AND NOT in_flight AND NOT is_queued THEN
		RETURN {{schema}}._finish(p_domain, 0::smallint, 9::smallint, NULL, 0, evs, p_now);
	END IF;
	IF in_flight THEN
		n := d.lease_attempts;
		f := d.fence;
		PERFORM {{schema}}._revoke(p_domain, d.fence, 2::smallint);
	ELSIF is_queued THEN
		SELECT coalesce(b.carried_attempts, 0) INTO n FROM {{schema}}.backlog b
		WHERE b.key = k AND b.domain = p_domain AND b.off = p_off;
	END IF;
	evs := evs || ROW(11, p_off, n, f, why)::{{schema}}.event;
	-- A deliberate kill does not park.
	evs := evs || {{schema}}._dead_letter(p_domain, p_off, n, f, why, p_reason, p_now, false, p.monotonic);
	RETURN {{schema}}._finish(p_domain, 0::smallint, 0::smallint, NULL, 0, evs, p_now);
END $$;

-- _redrive_keeping_delay is Redrive without ending a retry's delay (see
-- redrive).
CREATE OR REPLACE FUNCTION {{schema}}._redrive_keeping_delay(p_domain bytea, p_off bigint, p_now timestamptz, p {{schema}}.policy)
RETURNS {{schema}}.answer
LANGUAGE plpgsql AS $$
DECLARE
	k bytea := {{schema}}._key(p_domain);
	c record;
	evs {{schema}}.event[];
BEGIN
	p_now := coalesce(p_now, clock_timestamp());
	SELECT * INTO c FROM {{schema}}._open(p_domain, false, p_now, p);
	IF c.d IS NULL THEN
		RETURN {{schema}}._absent();
	END IF;
	evs := c.evs;
	DELETE FROM {{schema}}.dead_letters x WHERE x.key = k AND x.domain = p_domain AND x.off = p_off;
	IF NOT FOUND THEN
		RETURN {{schema}}._finish(p_domain, 0::smallint, 6::smallint, NULL, 0, evs, p_now);
	END IF;
	UPDATE {{schema}}.domains x SET failed = x.failed - 1 WHERE x.key = k AND x.domain = p_domain;
	PERFORM {{schema}}._push(p_domain, p_off, true);
	evs := evs || ROW(12, p_off, 0, 0, 0)::{{schema}}.event;
	RETURN {{schema}}._finish(p_domain, 0::smallint, 0::smallint, NULL, 0, evs, p_now);
END $$;

-- set_paused is Pause (p_paused set, creating the domain) and Resume.
CREATE OR REPLACE FUNCTION {{schema}}.set_paused(p_domain bytea, p_paused bool, p_now timestamptz, p {{schema}}.policy)
RETURNS {{schema}}.answer
LANGUAGE plpgsql AS $$
DECLARE
	c record;
	d {{schema}}.domains;
	evs {{schema}}.event[];
BEGIN
	p_now := coalesce(p_now, clock_timestamp());
	SELECT * INTO c FROM {{schema}}._open(p_domain, p_paused, p_now, p);
	IF c.d IS NULL THEN
		RETURN {{schema}}._absent();
	END IF;
	d := c.d;
	evs := c.evs;
	IF d.paused <> p_paused THEN
		UPDATE {{schema}}.domains x SET paused = p_paused WHERE x.key = d.key AND x.domain = p_domain;
		evs := evs || ROW(CASE WHEN p_paused THEN 14 ELSE 15 END, -1, 0, 0, 0)::{{schema}}.event;
	END IF;
	RETURN {{schema}}._finish(p_domain, 0::smallint, 0::smallint, NULL, 0, evs, p_now);
END $$;

-- forget is Forget: an idle, running domain with an empty backlog keeps
-- only its row's fence and serial, so that its fences go on growing if it
-- comes back; its counts join the forgotten domains'.
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
	UPDATE {{schema}}.meta m
	SET counts = (SELECT array_agg(u.x + u.y ORDER BY u.i) FROM unnest(m.counts,
		(SELECT x.counts FROM {{schema}}.domains x WHERE x.key = k AND x.domain = p_domain)) WITH ORDINALITY AS u(x, y, i));
	UPDATE {{schema}}.domains x
	SET forgotten = true, processed = '{}', revoked_fence = 0, revoked_why = 0, front_pos = 0, back_pos = 0, failed = 0,
		ended_off = NULL, ended_attempts = NULL, priority = 0,
		counts = array_fill(0::bigint, ARRAY[16])
	WHERE x.key = k AND x.domain = p_domain;
	RETURN a;
END $$;

-- reap expires up to p_limit leases due at p_now, one domain at a time,
-- skipping domains another call holds (it expires their lease itself).
CREATE OR REPLACE FUNCTION {{schema}}.reap(p_limit int, p_now timestamptz, p {{schema}}.policy)
RETURNS TABLE (domain bytea, off bigint, fence bigint, serial bigint, attempts int, dead bool, a {{schema}}.answer)
LANGUAGE plpgsql AS $$
DECLARE
	dom bytea;
	d {{schema}}.domains;
	evs {{schema}}.event[];
BEGIN
	p_now := coalesce(p_now, clock_timestamp());
	FOR dom IN SELECT x.domain FROM {{schema}}.domains x WHERE x.lease_expires_at <= p_now
		ORDER BY x.domain LIMIT p_limit FOR UPDATE SKIP LOCKED
	LOOP
		SELECT * INTO d FROM {{schema}}.domains x WHERE x.key = {{schema}}._key(dom) AND x.domain = dom;
		evs := {{schema}}._expire(dom, p_now, p);
		CONTINUE WHEN cardinality(evs) = 0;
		domain := dom;
		off := d.lease_off;
		fence := d.fence;
		serial := d.serial;
		attempts := d.lease_attempts;
		dead := EXISTS (SELECT FROM {{schema}}.dead_letters x WHERE x.key = d.key AND x.domain = dom AND x.off = d.lease_off);
		a := {{schema}}._finish(dom, 0::smallint, 0::smallint, NULL, 0, evs, p_now);
		RETURN NEXT;
	END LOOP;
END $$;

-- claim is Claim when a lease is due: it takes over up to p_limit domains
-- whose lease is due (their rows carry no offset, only the expiry's
-- events), then leases the heads of up to p_limit ready domains, highest
-- priority first, then the longest waiting, skipping domains another call
-- holds.
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
		SELECT r.dom, {{schema}}._key(r.dom) AS k, b.off FROM unnest(doms) AS r(dom),
			LATERAL (SELECT y.off FROM {{schema}}.backlog y
				WHERE y.key = {{schema}}._key(r.dom) AND y.domain = r.dom
				ORDER BY y.pos LIMIT 1) b
	), taken AS (
		DELETE FROM {{schema}}.backlog y USING h WHERE y.key = h.k AND y.domain = h.dom AND y.off = h.off
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

-- retry is Retry: the holder's attempt failed, and the offset waits at
-- the front of its domain's line until p_delay has passed, for any worker
-- to claim; past its retries it is a dead letter with p_cause instead.
-- Status 1: retried; 2: dead-lettered.
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
	UPDATE {{schema}}.domains x SET ready_at = p_now + p_delay WHERE x.key = d.key AND x.domain = p_domain AND NOT x.paused;
	IF FOUND AND p_delay <= interval '0' THEN -- ready now, and _finish sees no change to announce
		PERFORM {{schema}}._notify_ready(p_now, ARRAY[p_domain]);
	END IF;
	RETURN {{schema}}._finish(p_domain, 1::smallint, 0::smallint, NULL, d.lease_retries + 1, evs, p_now);
END $$;

-- succeed_many is SucceedMany of the processes of versions before 002's,
-- during an upgrade (see 002_batches.sql).
CREATE OR REPLACE FUNCTION {{schema}}.succeed_many(p_domains bytea[], p_fences bigint[], p_serials bigint[], p_same bool,
	p_now timestamptz, p_monotonic bool)
RETURNS TABLE (domain bytea, off bigint, attempts int, fence bigint, at timestamptz)
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $$
DECLARE
	dom_keys bytea[] := ARRAY(SELECT {{schema}}._key(u.dom) FROM unnest(p_domains) AS u(dom));
BEGIN
	p_now := coalesce(p_now, clock_timestamp());
	IF cardinality(p_domains) > 1 THEN -- one row needs no order
		PERFORM FROM {{schema}}.domains x WHERE x.key = ANY (dom_keys) AND x.domain = ANY (p_domains) ORDER BY x.domain FOR UPDATE;
	END IF;
	RETURN QUERY
	WITH u AS (
		UPDATE {{schema}}.domains x
		SET lease_off = NULL, lease_attempts = 0, lease_retries = 0, lease_acquired_at = NULL, lease_expires_at = NULL,
			ended_off = x.lease_off, ended_attempts = x.lease_attempts, lease_payload = false,
			processed = CASE WHEN p_monotonic
				THEN nummultirange(numrange(0, greatest(coalesce(upper(x.processed), 0), x.lease_off::numeric + 1)))
				ELSE x.processed + nummultirange(numrange(x.lease_off, x.lease_off::numeric + 1)) END,
			ready_at = CASE WHEN x.queued > 0 AND NOT x.paused THEN p_now END,
			counts[3] = x.counts[3] + 1
		FROM unnest(p_domains, dom_keys, p_fences, p_serials) AS t(dom, k, fence, serial)
		WHERE x.key = t.k AND x.domain = t.dom AND x.fence = t.fence AND x.serial = t.serial AND p_same
			AND x.lease_off IS NOT NULL AND (x.lease_expires_at IS NULL OR p_now < x.lease_expires_at)
		RETURNING x.domain AS dom, x.key AS k, x.ended_off, x.ended_attempts, x.fence
	), gone AS (
		DELETE FROM {{schema}}.payloads y USING u WHERE y.key = u.k AND y.domain = u.dom AND y.off = u.ended_off
	)
	SELECT u.dom, u.ended_off, u.ended_attempts, u.fence, p_now FROM u;
	-- The domains it made ready: those ended with offsets queued, whose
	-- rows this transaction wrote last.
	IF EXISTS (SELECT FROM {{schema}}.domains x WHERE x.key = ANY (dom_keys) AND x.domain = ANY (p_domains) AND x.ready_at = p_now
		AND x.lease_off IS NULL) THEN
		PERFORM {{schema}}._notify_ready(p_now, p_domains);
	END IF;
END $$;

-- set_priority is SetPriority; it creates an unknown domain, as Pause does.
CREATE OR REPLACE FUNCTION {{schema}}.set_priority(p_domain bytea, p_priority int, p_now timestamptz, p {{schema}}.policy)
RETURNS {{schema}}.answer
LANGUAGE plpgsql AS $$
DECLARE
	c record;
BEGIN
	p_now := coalesce(p_now, clock_timestamp());
	SELECT * INTO c FROM {{schema}}._open(p_domain, true, p_now, p);
	UPDATE {{schema}}.domains x SET priority = p_priority
	WHERE x.key = {{schema}}._key(p_domain) AND x.domain = p_domain AND x.priority <> p_priority;
	RETURN {{schema}}._finish(p_domain, 0::smallint, 0::smallint, NULL, 0, c.evs, p_now);
END $$;

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
	dom_keys bytea[];
BEGIN
	p_now := coalesce(p_now, clock_timestamp());
	SELECT array_agg(u.dom ORDER BY u.dom), array_agg({{schema}}._key(u.dom) ORDER BY u.dom) INTO doms, dom_keys
	FROM (SELECT DISTINCT v.dom FROM unnest(p_domains) AS v(dom)) u;
	INSERT INTO {{schema}}.domains (domain, serial)
	SELECT u.dom, nextval('{{schema}}.domain_serial') FROM unnest(doms, dom_keys) AS u(dom, k)
	WHERE NOT EXISTS (SELECT FROM {{schema}}.domains x WHERE x.key = u.k AND x.domain = u.dom)
	ORDER BY u.dom
	ON CONFLICT (key) DO NOTHING;
	PERFORM FROM {{schema}}.domains x WHERE x.key = ANY (dom_keys) AND x.domain = ANY (doms) ORDER BY x.domain FOR UPDATE;
	UPDATE {{schema}}.domains x SET forgotten = false WHERE x.key = ANY (dom_keys) AND x.domain = ANY (doms) AND x.forgotten;
	IF EXISTS (SELECT FROM {{schema}}.domains x WHERE x.key = ANY (dom_keys) AND x.domain = ANY (doms) AND x.lease_expires_at <= p_now) THEN
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
		SELECT u.i::int AS i, u.dom, d.key, u.off, u.payload, d.serial, d.front_pos, d.back_pos, q.queued IS NOT NULL AS queued,
			CASE
				WHEN d.processed @> u.off::numeric AND NOT (p.monotonic
					AND (d.lease_off IS NOT DISTINCT FROM u.off OR f.dead IS NOT NULL OR q.queued IS NOT NULL)) THEN 4
				WHEN f.dead IS NOT NULL THEN 5
				WHEN d.lease_off = u.off THEN 2
				ELSE 3
			END::smallint AS status
		FROM unnest(p_domains, p_offs, p_payloads) WITH ORDINALITY AS u(dom, off, payload, i)
		JOIN {{schema}}.domains d ON d.key = {{schema}}._key(u.dom) AND d.domain = u.dom
		-- Probes of one row each (LIMIT 1 keeps them so, where EXISTS may
		-- become a scan of the whole table).
		LEFT JOIN LATERAL (SELECT true AS dead FROM {{schema}}.dead_letters x
			WHERE x.key = d.key AND x.domain = u.dom AND x.off = u.off LIMIT 1) f ON true
		LEFT JOIN LATERAL (SELECT true AS queued FROM {{schema}}.backlog b
			WHERE b.key = d.key AND b.domain = u.dom AND b.off = u.off LIMIT 1) q ON true
	), s AS MATERIALIZED (
		SELECT t.*, t.status = 3 AND NOT t.queued AND t.i = min(t.i) OVER (PARTITION BY t.dom, t.off) AS fresh
		FROM t
	), k AS MATERIALIZED (
		SELECT s.dom, s.key, s.off, s.payload, row_number() OVER (PARTITION BY s.dom ORDER BY s.i) AS k,
			count(*) OVER (PARTITION BY s.dom) AS n, s.front_pos, s.back_pos
		FROM s WHERE s.fresh
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
	)
	SELECT s.i, ROW(s.status, 0, NULL, 0, NULL, NULL, 0, s.serial, 0, 0, NULL, NULL, false,
		CASE WHEN s.fresh THEN ARRAY[2::smallint] END, CASE WHEN s.fresh THEN ARRAY[s.off] END,
		CASE WHEN s.fresh THEN ARRAY[0] END, CASE WHEN s.fresh THEN ARRAY[0::bigint] END,
		CASE WHEN s.fresh THEN ARRAY[0::smallint] END, p_now)::{{schema}}.answer
	-- notified runs only if the query reads it: a join whose columns
	-- nothing reads would be left out.
	FROM s, (SELECT count(*) AS c FROM notified) n WHERE n.c >= 0;
END $$;

-- _end_delay makes domain ready at p_now if it waits for a delay to end
-- and its backlog's head is no longer p_head, and tells waiting claims.
CREATE OR REPLACE FUNCTION {{schema}}._end_delay(p_domain bytea, p_head bigint, p_now timestamptz) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
	UPDATE {{schema}}.domains x SET ready_at = p_now
	WHERE x.key = {{schema}}._key(p_domain) AND x.domain = p_domain AND x.ready_at > p_now
		AND {{schema}}._head(p_domain) IS DISTINCT FROM p_head;
	IF FOUND THEN
		PERFORM {{schema}}._notify_ready(p_now, ARRAY[p_domain]);
	END IF;
END $$;

-- _head_locked locks domain's row, if it has one, and returns its
-- backlog's head.
CREATE OR REPLACE FUNCTION {{schema}}._head_locked(p_domain bytea) RETURNS bigint
LANGUAGE plpgsql AS $$
BEGIN
	PERFORM FROM {{schema}}.domains x WHERE x.key = {{schema}}._key(p_domain) AND x.domain = p_domain FOR UPDATE;
	RETURN {{schema}}._head(p_domain);
END $$;
