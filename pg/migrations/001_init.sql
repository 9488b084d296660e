-- The lease contract's state: one row per domain (the lease, the fence,
-- the processed offsets, the order of its backlog), its backlog and its
-- dead letters, and one function per call, so that each call is one round
-- trip and one transaction (the usual grant and Succeed are first tried as
-- one UPDATE of the domain's row: see fast.go). {{schema}} is the schema's
-- quoted name.

CREATE TABLE {{schema}}.meta (
	singleton bool PRIMARY KEY DEFAULT true CHECK (singleton),
	-- instance is the database's part of every token: random, non-zero.
	instance bigint NOT NULL CHECK (instance <> 0),
	-- counts are the events of forgotten domains, by kind.
	counts bigint[] NOT NULL DEFAULT array_fill(0::bigint, ARRAY[16])
);

CREATE SEQUENCE {{schema}}.domain_serial;

CREATE TABLE {{schema}}.domains (
	domain bytea PRIMARY KEY,
	serial bigint NOT NULL,              -- the domain's part of its tokens; never reused
	fence bigint NOT NULL DEFAULT 0,     -- the latest grant's; only grows, across Forget too
	forgotten bool NOT NULL DEFAULT false, -- Forget keeps the row for its fence, and nothing else
	paused bool NOT NULL DEFAULT false,
	lease_off bigint,                    -- the offset in flight; NULL: idle
	lease_attempts int NOT NULL DEFAULT 0, -- its attempts made, this one included
	lease_retries int NOT NULL DEFAULT 0,  -- its failed attempts
	lease_acquired_at timestamptz,       -- its first grant
	lease_expires_at timestamptz,        -- NULL: never
	revoked_fence bigint NOT NULL DEFAULT 0, -- the latest lease that ended without its holder
	revoked_why smallint NOT NULL DEFAULT 0, -- 1: it expired; 2: an operator took it
	processed nummultirange NOT NULL DEFAULT '{}', -- with monotonic offsets, [0, hw]
	front_pos bigint NOT NULL DEFAULT 0, -- the backlog's positions run from front_pos
	back_pos bigint NOT NULL DEFAULT 0,  -- to back_pos, excluded
	-- queued and failed count the domain's backlog and dead letters: the
	-- fast statements (see fast.go) read them in the row they lock, where
	-- a subquery would read an older snapshot after waiting for the lock.
	queued int NOT NULL DEFAULT 0,
	failed int NOT NULL DEFAULT 0,
	-- The offset and attempts of the lease the fast Succeed ended last: its
	-- RETURNING reads them back, as PostgreSQL 15 returns no old values.
	ended_off bigint,
	ended_attempts int,
	lease_payload bool NOT NULL DEFAULT false, -- the offset in flight has a stored payload
	-- ready_at is set while the domain is idle, running and has offsets
	-- queued, the only time a claim may take its head: to when it became
	-- so (or when a retry's delay ends). Claims take the highest priority
	-- first, then the longest waiting.
	ready_at timestamptz,
	priority int NOT NULL DEFAULT 0,
	counts bigint[] NOT NULL DEFAULT array_fill(0::bigint, ARRAY[16])
) WITH (fillfactor = 50); -- room on each page for the next version of a row: updates stay HOT

-- Every call rewrites a domain's row, and claims and completions move it in
-- and out of the ready index: vacuum runs after a small share of the table
-- changed, without pausing, so that dead versions do not pile up under a
-- busy queue.
ALTER TABLE {{schema}}.domains SET (autovacuum_vacuum_scale_factor = 0.01, autovacuum_vacuum_threshold = 1000,
	autovacuum_vacuum_cost_delay = 0);

CREATE INDEX domains_expiry ON {{schema}}.domains (lease_expires_at) WHERE lease_expires_at IS NOT NULL;
CREATE INDEX domains_ready ON {{schema}}.domains (priority DESC, ready_at) WHERE ready_at IS NOT NULL;

CREATE TABLE {{schema}}.backlog (
	domain bytea NOT NULL,
	off bigint NOT NULL,
	pos bigint NOT NULL,
	-- What an offset that went back to the backlog carries to its next
	-- grant: its attempts made and failed, and its first grant.
	carried_attempts int,
	carried_retries int,
	carried_acquired_at timestamptz,
	PRIMARY KEY (domain, off)
);

CREATE UNIQUE INDEX backlog_order ON {{schema}}.backlog (domain, pos);

-- Offsets pass through the backlog: its rows are inserted and deleted, one
-- each per offset, and vacuum keeps up as with domains.
ALTER TABLE {{schema}}.backlog SET (autovacuum_vacuum_scale_factor = 0.01, autovacuum_vacuum_threshold = 1000,
	autovacuum_vacuum_cost_delay = 0);

-- payloads holds what Enqueue stored with an offset, from then until the
-- offset succeeds (or its domain is forgotten): while it is queued, in
-- flight, and failed.
CREATE TABLE {{schema}}.payloads (
	domain bytea NOT NULL,
	off bigint NOT NULL,
	payload bytea NOT NULL,
	PRIMARY KEY (domain, off)
);

ALTER TABLE {{schema}}.payloads SET (autovacuum_vacuum_scale_factor = 0.01, autovacuum_vacuum_threshold = 1000,
	autovacuum_vacuum_cost_delay = 0);

CREATE TABLE {{schema}}.dead_letters (
	domain bytea NOT NULL,
	off bigint NOT NULL,
	why smallint NOT NULL,  -- 1: the lease expired; 2: cause
	cause bytea,
	attempts int NOT NULL,
	at timestamptz NOT NULL,
	PRIMARY KEY (domain, off)
);

CREATE TYPE {{schema}}.policy AS (
	max_retries int,
	ttl interval,       -- NULL: leases never expire
	lifo bool,
	best_effort bool,
	park bool,
	monotonic bool
);

-- An event is one transition a call made: its kind (worklease.EventKind),
-- offset (-1 for none), attempt, the fence of its token (0 for none), and
-- why (1: the lease expired; 2: the call's cause or reason).
CREATE TYPE {{schema}}.event AS (kind smallint, off bigint, attempt int, fence bigint, why smallint);

-- _lock locks and returns domain's row, creating it if create is set. A
-- forgotten domain is absent unless created again, keeping its fence.
CREATE FUNCTION {{schema}}._lock(p_domain bytea, p_create bool) RETURNS {{schema}}.domains
LANGUAGE plpgsql AS $$
DECLARE
	d {{schema}}.domains;
BEGIN
	SELECT * INTO d FROM {{schema}}.domains WHERE domain = p_domain FOR UPDATE;
	IF NOT FOUND AND p_create THEN
		INSERT INTO {{schema}}.domains (domain, serial) VALUES (p_domain, nextval('{{schema}}.domain_serial'))
		ON CONFLICT (domain) DO NOTHING;
		SELECT * INTO d FROM {{schema}}.domains WHERE domain = p_domain FOR UPDATE;
	END IF;
	IF d.forgotten THEN
		IF NOT p_create THEN
			RETURN NULL;
		END IF;
		UPDATE {{schema}}.domains SET forgotten = false WHERE domain = p_domain RETURNING * INTO d;
	END IF;
	RETURN d;
END $$;

-- _processed reports whether off counts as processed in d.
CREATE FUNCTION {{schema}}._processed(d {{schema}}.domains, p_off bigint, p_monotonic bool) RETURNS bool
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
		AND NOT EXISTS (SELECT FROM {{schema}}.dead_letters x WHERE x.domain = d.domain AND x.off = p_off)
		AND NOT EXISTS (SELECT FROM {{schema}}.backlog b WHERE b.domain = d.domain AND b.off = p_off);
END $$;

-- _terminal records that off of domain reached a terminal state.
CREATE FUNCTION {{schema}}._terminal(p_domain bytea, p_off bigint, p_succeeded bool, p_monotonic bool) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
	IF p_monotonic THEN
		UPDATE {{schema}}.domains
		SET processed = nummultirange(numrange(0, greatest(coalesce(upper(processed), 0), p_off::numeric + 1)))
		WHERE domain = p_domain;
	ELSIF p_succeeded THEN
		UPDATE {{schema}}.domains
		SET processed = processed + nummultirange(numrange(p_off, p_off::numeric + 1))
		WHERE domain = p_domain;
	END IF;
	IF p_succeeded THEN
		DELETE FROM {{schema}}.payloads WHERE domain = p_domain AND off = p_off;
	END IF;
END $$;

-- _push queues off in domain, at the front or the back, with its payload
-- if it has one, unless it is queued already, and reports whether it was
-- added.
CREATE FUNCTION {{schema}}._push(p_domain bytea, p_off bigint, p_front bool,
	p_attempts int DEFAULT NULL, p_retries int DEFAULT NULL, p_acquired_at timestamptz DEFAULT NULL,
	p_payload bytea DEFAULT NULL) RETURNS bool
LANGUAGE plpgsql AS $$
DECLARE
	p bigint;
BEGIN
	IF EXISTS (SELECT FROM {{schema}}.backlog WHERE domain = p_domain AND off = p_off) THEN
		RETURN false;
	END IF;
	IF p_front THEN
		UPDATE {{schema}}.domains SET front_pos = front_pos - 1, queued = queued + 1 WHERE domain = p_domain RETURNING front_pos INTO p;
	ELSE
		UPDATE {{schema}}.domains SET back_pos = back_pos + 1, queued = queued + 1 WHERE domain = p_domain RETURNING back_pos - 1 INTO p;
	END IF;
	INSERT INTO {{schema}}.backlog (domain, off, pos, carried_attempts, carried_retries, carried_acquired_at)
	VALUES (p_domain, p_off, p, p_attempts, p_retries, p_acquired_at);
	IF p_payload IS NOT NULL THEN
		INSERT INTO {{schema}}.payloads (domain, off, payload) VALUES (p_domain, p_off, p_payload)
		ON CONFLICT (domain, off) DO NOTHING;
	END IF;
	RETURN true;
END $$;

-- _head returns the backlog's head, or NULL.
CREATE FUNCTION {{schema}}._head(p_domain bytea) RETURNS bigint
LANGUAGE sql STABLE AS $$
	SELECT off FROM {{schema}}.backlog WHERE domain = p_domain ORDER BY pos LIMIT 1
$$;

-- _release clears domain's lease.
CREATE FUNCTION {{schema}}._release(p_domain bytea) RETURNS void
LANGUAGE sql AS $$
	UPDATE {{schema}}.domains
	SET lease_off = NULL, lease_attempts = 0, lease_retries = 0, lease_acquired_at = NULL, lease_expires_at = NULL,
		lease_payload = false
	WHERE domain = p_domain
$$;

-- _revoke ends domain's lease, whose fence is p_fence, without its holder,
-- who learns why from then on: 1, it expired; 2, an operator took it.
CREATE FUNCTION {{schema}}._revoke(p_domain bytea, p_fence bigint, p_why smallint) RETURNS void
LANGUAGE sql AS $$
	UPDATE {{schema}}.domains
	SET lease_off = NULL, lease_attempts = 0, lease_retries = 0, lease_acquired_at = NULL, lease_expires_at = NULL,
		lease_payload = false, revoked_fence = p_fence, revoked_why = p_why
	WHERE domain = p_domain
$$;

-- _dead_letter makes off failed after attempts attempts: a lease on it
-- ends, it leaves the backlog, and the domain is parked if park is set.
CREATE FUNCTION {{schema}}._dead_letter(p_domain bytea, p_off bigint, p_attempts int, p_fence bigint,
	p_why smallint, p_cause bytea, p_now timestamptz, p_park bool, p_monotonic bool) RETURNS {{schema}}.event[]
LANGUAGE plpgsql AS $$
DECLARE
	evs {{schema}}.event[];
	was_paused bool;
BEGIN
	UPDATE {{schema}}.domains
	SET lease_off = NULL, lease_attempts = 0, lease_retries = 0, lease_acquired_at = NULL, lease_expires_at = NULL,
		lease_payload = false
	WHERE domain = p_domain AND lease_off = p_off;
	DELETE FROM {{schema}}.backlog WHERE domain = p_domain AND off = p_off;
	IF FOUND THEN
		UPDATE {{schema}}.domains SET queued = queued - 1 WHERE domain = p_domain;
	END IF;
	INSERT INTO {{schema}}.dead_letters (domain, off, why, cause, attempts, at)
	VALUES (p_domain, p_off, p_why, p_cause, p_attempts, p_now);
	UPDATE {{schema}}.domains SET failed = failed + 1 WHERE domain = p_domain;
	PERFORM {{schema}}._terminal(p_domain, p_off, false, p_monotonic);
	evs := ARRAY[ROW(5, p_off, p_attempts, p_fence, p_why)::{{schema}}.event];
	IF p_park THEN
		SELECT paused INTO was_paused FROM {{schema}}.domains WHERE domain = p_domain;
		IF NOT was_paused THEN
			UPDATE {{schema}}.domains SET paused = true WHERE domain = p_domain;
			evs := evs || ROW(14, p_off, 0, 0, p_why)::{{schema}}.event;
		END IF;
	END IF;
	RETURN evs;
END $$;

-- _expire revokes domain's lease if it has expired at now: the expiry
-- counts as a failed attempt; with retries left, the offset goes back to
-- the front of the line, and without, it is dead-lettered.
CREATE FUNCTION {{schema}}._expire(p_domain bytea, p_now timestamptz, p {{schema}}.policy) RETURNS {{schema}}.event[]
LANGUAGE plpgsql AS $$
DECLARE
	d {{schema}}.domains;
	evs {{schema}}.event[];
BEGIN
	SELECT * INTO d FROM {{schema}}.domains WHERE domain = p_domain;
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
CREATE FUNCTION {{schema}}._grant(p_domain bytea, p_off bigint, p_now timestamptz, p {{schema}}.policy) RETURNS {{schema}}.event[]
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
	SET fence = fence + 1, lease_off = p_off, lease_attempts = n, lease_retries = coalesce(cr, 0),
		lease_acquired_at = coalesce(cat, p_now), lease_expires_at = p_now + p.ttl,
		queued = queued - CASE WHEN was_queued THEN 1 ELSE 0 END,
		lease_payload = EXISTS (SELECT FROM {{schema}}.payloads x WHERE x.domain = p_domain AND x.off = p_off)
	WHERE domain = p_domain
	RETURNING fence INTO f;
	RETURN ARRAY[ROW(1, p_off, n, f, 0)::{{schema}}.event];
END $$;

-- _check returns the error a call with token (fence, serial; same_instance
-- says whether its instance is the database's) gets on d, 0 if none:
-- 1 no lease, 2 token mismatch, 3 lease expired, 4 lease revoked.
CREATE FUNCTION {{schema}}._check(d {{schema}}.domains, p_fence bigint, p_serial bigint, p_same_instance bool) RETURNS smallint
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
	IF d.lease_off IS NOT NULL AND p_same_instance AND p_serial = d.serial AND p_fence = d.fence THEN
		RETURN 0;
	END IF;
	IF p_same_instance AND p_serial = d.serial AND p_fence <> 0 AND p_fence = d.revoked_fence THEN
		RETURN CASE d.revoked_why WHEN 1 THEN 3 ELSE 4 END;
	END IF;
	RETURN CASE WHEN d.lease_off IS NULL THEN 1 ELSE 2 END;
END $$;

-- _count adds evs to domain's counts.
CREATE FUNCTION {{schema}}._count(p_domain bytea, evs {{schema}}.event[]) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
	c bigint[];
	e {{schema}}.event;
BEGIN
	IF cardinality(evs) = 0 THEN
		RETURN;
	END IF;
	SELECT counts INTO c FROM {{schema}}.domains WHERE domain = p_domain;
	FOREACH e IN ARRAY evs LOOP
		c[e.kind] := c[e.kind] + 1;
	END LOOP;
	UPDATE {{schema}}.domains SET counts = c WHERE domain = p_domain;
END $$;

-- An answer is what a call returns: its answer (status, err, hint,
-- retry_count), then what the domain is after it: its lease, whether it is
-- paused, its head (the offset it grants next if it is idle and running,
-- else NULL), and the call's events as parallel arrays. err is 0, or 1 no
-- lease, 2 token mismatch, 3 lease expired, 4 lease revoked, 5 backlog
-- order (the head is the offset expected), 6 not dead-lettered, 7 already
-- processed, 8 domain busy, 9 offset ahead, 10 unknown domain.
CREATE TYPE {{schema}}.answer AS (
	status smallint, err smallint, hint bigint, retry_count int, head bigint,
	lease_off bigint, fence bigint, serial bigint, attempts int, retries int,
	acquired_at timestamptz, expires_at timestamptz, paused bool,
	ev_kinds smallint[], ev_offs bigint[], ev_attempts int[], ev_fences bigint[], ev_whys smallint[],
	at timestamptz -- the call's time
);

-- _notify_ready tells the processes waiting for claims (see WaitClaim),
-- once the transaction commits, that domains of the schema became ready,
-- unless another domain is ready already: then no worker waits for long,
-- and a notification costs every committing transaction that sends one a
-- turn at a lock of the whole database. Notifications of one transaction
-- with the same text are told once.
CREATE FUNCTION {{schema}}._notify_ready(p_now timestamptz, p_new bytea[]) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
	IF NOT EXISTS (SELECT FROM {{schema}}.domains x WHERE x.ready_at <= p_now AND x.domain <> ALL (p_new)) THEN
		PERFORM pg_notify('worklease_ready', '{{schema}}');
	END IF;
END $$;

-- _finish ends a call on domain: it counts the call's events and returns
-- its answer.
CREATE FUNCTION {{schema}}._finish(p_domain bytea, p_status smallint, p_err smallint, p_hint bigint, p_retry_count int,
	evs {{schema}}.event[], p_now timestamptz) RETURNS {{schema}}.answer
LANGUAGE plpgsql AS $$
DECLARE
	d {{schema}}.domains;
	a {{schema}}.answer;
	changed bool;
BEGIN
	PERFORM {{schema}}._count(p_domain, evs);
	UPDATE {{schema}}.domains x
	SET ready_at = CASE WHEN x.lease_off IS NULL AND x.queued > 0 AND NOT x.paused THEN coalesce(x.ready_at, p_now) END
	WHERE x.domain = p_domain
		AND x.ready_at IS DISTINCT FROM CASE WHEN x.lease_off IS NULL AND x.queued > 0 AND NOT x.paused THEN coalesce(x.ready_at, p_now) END;
	changed := FOUND;
	SELECT * INTO d FROM {{schema}}.domains x WHERE x.domain = p_domain;
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

-- _absent is the answer for a domain the database does not know.
CREATE FUNCTION {{schema}}._absent() RETURNS {{schema}}.answer
LANGUAGE sql IMMUTABLE AS $$
	SELECT ROW(0, 10, NULL, 0, NULL, NULL, 0, 0, 0, 0, NULL, NULL, false, NULL, NULL, NULL, NULL, NULL, NULL)::{{schema}}.answer
$$;

-- _reject is the event of a call refused on d: a rejection.
CREATE FUNCTION {{schema}}._reject(d {{schema}}.domains) RETURNS {{schema}}.event
LANGUAGE sql IMMUTABLE AS $$
	SELECT ROW(9, coalesce(d.lease_off, -1), 0, 0, 0)::{{schema}}.event
$$;

-- try_acquire is TryAcquire, and Enqueue with p_grant unset: an offset
-- is queued, with p_payload, even on an idle domain. Statuses are
-- worklease.AcquireStatus.
CREATE FUNCTION {{schema}}.try_acquire(p_domain bytea, p_off bigint, p_now timestamptz, p {{schema}}.policy,
	p_grant bool DEFAULT true, p_payload bytea DEFAULT NULL)
RETURNS {{schema}}.answer
LANGUAGE plpgsql AS $$
DECLARE
	d {{schema}}.domains;
	evs {{schema}}.event[];
	h bigint;
	st smallint := 0;
	e smallint := 0;
BEGIN
	p_now := coalesce(p_now, clock_timestamp());
	PERFORM {{schema}}._lock(p_domain, true);
	evs := {{schema}}._expire(p_domain, p_now, p);
	SELECT * INTO d FROM {{schema}}.domains x WHERE x.domain = p_domain;
	IF {{schema}}._processed(d, p_off, p.monotonic) THEN
		st := 4;
	ELSIF EXISTS (SELECT FROM {{schema}}.dead_letters x WHERE x.domain = p_domain AND x.off = p_off) THEN
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
CREATE FUNCTION {{schema}}._open(p_domain bytea, p_create bool, p_now timestamptz, p {{schema}}.policy,
	OUT d {{schema}}.domains, OUT evs {{schema}}.event[])
LANGUAGE plpgsql AS $$
BEGIN
	d := {{schema}}._lock(p_domain, p_create);
	IF d.domain IS NULL THEN
		d := NULL;
		RETURN;
	END IF;
	evs := {{schema}}._expire(p_domain, p_now, p);
	SELECT * INTO d FROM {{schema}}.domains x WHERE x.domain = p_domain;
END $$;

-- _holder locks domain, expires its lease if due, and checks a holder's
-- token (fence, serial; p_same says whether its instance is the
-- database's). It returns the domain, its events so far and the error,
-- with a rejection among the events if there is one; d is NULL for an
-- unknown domain.
CREATE FUNCTION {{schema}}._holder(p_domain bytea, p_fence bigint, p_serial bigint, p_same bool, p_now timestamptz,
	p {{schema}}.policy, OUT d {{schema}}.domains, OUT evs {{schema}}.event[], OUT e smallint)
LANGUAGE plpgsql AS $$
DECLARE
	o record;
BEGIN
	SELECT * INTO o FROM {{schema}}._open(p_domain, false, p_now, p);
	IF o.d IS NULL THEN
		RETURN;
	END IF;
	d := o.d;
	evs := o.evs;
	e := {{schema}}._check(d, p_fence, p_serial, p_same);
	IF e <> 0 THEN
		evs := evs || {{schema}}._reject(d);
	END IF;
END $$;

-- succeed is Succeed, and SucceedNext if p_next is set. Statuses are
-- worklease.SucceedStatus.
CREATE FUNCTION {{schema}}.succeed(p_domain bytea, p_fence bigint, p_serial bigint, p_same bool, p_next bool,
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
	ELSIF p_next AND NOT d.paused THEN
		evs := evs || {{schema}}._grant(p_domain, h, p_now, p);
		st := 3;
		h := NULL;
	ELSE
		st := 2;
	END IF;
	RETURN {{schema}}._finish(p_domain, st, 0::smallint, h, 0, evs, p_now);
END $$;

-- fail is Fail, and FailNext if p_next is set; p_cause is the cause's text
-- to keep in a dead letter, NULL for none. Statuses are
-- worklease.FailStatus.
CREATE FUNCTION {{schema}}.fail(p_domain bytea, p_fence bigint, p_serial bigint, p_same bool, p_cause bytea, p_next bool,
	p_now timestamptz, p {{schema}}.policy)
RETURNS {{schema}}.answer
LANGUAGE plpgsql AS $$
DECLARE
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
		WHERE x.domain = p_domain;
		evs := evs || ROW(4, d.lease_off, d.lease_retries + 1, d.fence, 2)::{{schema}}.event;
		RETURN {{schema}}._finish(p_domain, 1::smallint, 0::smallint, NULL, d.lease_retries + 1, evs, p_now);
	END IF;
	evs := evs || {{schema}}._dead_letter(p_domain, d.lease_off, d.lease_attempts, d.fence, 2::smallint, p_cause, p_now, p.park, p.monotonic);
	SELECT x.paused INTO paused FROM {{schema}}.domains x WHERE x.domain = p_domain;
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
CREATE FUNCTION {{schema}}.extend(p_domain bytea, p_fence bigint, p_serial bigint, p_same bool, p_d interval,
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
		UPDATE {{schema}}.domains x SET lease_expires_at = p_now + p_d WHERE x.domain = p_domain;
		evs := evs || ROW(8, d.lease_off, d.lease_attempts, d.fence, 0)::{{schema}}.event;
	END IF;
	RETURN {{schema}}._finish(p_domain, 0::smallint, c.e, NULL, 0, evs, p_now);
END $$;

-- inspect is Inspect: it expires domain's lease if it is due, then
-- reports the domain, all in one transaction: the answer (absent for an
-- unknown domain), the backlog, front first, the number of offsets that
-- count as processed (at most 2^63-1) and the number of failed ones.
CREATE FUNCTION {{schema}}.inspect(p_domain bytea, p_now timestamptz, p {{schema}}.policy,
	OUT backlog bigint[], OUT processed bigint, OUT failed bigint, OUT a {{schema}}.answer)
LANGUAGE plpgsql AS $$
DECLARE
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
	SELECT * INTO d FROM {{schema}}.domains x WHERE x.domain = p_domain;
	SELECT coalesce(array_agg(b.off ORDER BY b.pos), '{}') INTO backlog FROM {{schema}}.backlog b WHERE b.domain = p_domain;
	processed := least({{schema}}.processed_count(d, p.monotonic), 9223372036854775807)::bigint;
	SELECT count(*) INTO failed FROM {{schema}}.dead_letters x WHERE x.domain = p_domain;
END $$;

-- processed_count is the number of offsets of d that count as processed
-- (see worklease.DomainInfo.Processed), as numeric: it can reach 2^63.
CREATE FUNCTION {{schema}}.processed_count(d {{schema}}.domains, p_monotonic bool) RETURNS numeric
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
		- (SELECT count(*) FROM {{schema}}.dead_letters x WHERE x.domain = d.domain)
		- (SELECT count(*) FROM {{schema}}.backlog b WHERE b.domain = d.domain AND b.off <= hw)
		- CASE WHEN d.lease_off <= hw THEN 1 ELSE 0 END;
END $$;

-- kill is Kill; p_create says whether an unknown domain is created (not
-- with monotonic offsets, where it has no offset to kill), and p_reason is
-- the dead letter's cause, NULL for none.
CREATE FUNCTION {{schema}}.kill(p_domain bytea, p_off bigint, p_reason bytea, p_create bool,
	p_now timestamptz, p {{schema}}.policy)
RETURNS {{schema}}.answer
LANGUAGE plpgsql AS $$
DECLARE
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
	is_queued := EXISTS (SELECT FROM {{schema}}.backlog b WHERE b.domain = p_domain AND b.off = p_off);
	IF {{schema}}._processed(d, p_off, p.monotonic) THEN
		RETURN {{schema}}._finish(p_domain, 0::smallint, 7::smallint, NULL, 0, evs, p_now);
	END IF;
	IF EXISTS (SELECT FROM {{schema}}.dead_letters x WHERE x.domain = p_domain AND x.off = p_off) THEN
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
		SELECT coalesce(b.carried_attempts, 0) INTO n FROM {{schema}}.backlog b WHERE b.domain = p_domain AND b.off = p_off;
	END IF;
	evs := evs || ROW(11, p_off, n, f, why)::{{schema}}.event;
	-- A deliberate kill does not park.
	evs := evs || {{schema}}._dead_letter(p_domain, p_off, n, f, why, p_reason, p_now, false, p.monotonic);
	RETURN {{schema}}._finish(p_domain, 0::smallint, 0::smallint, NULL, 0, evs, p_now);
END $$;

-- redrive is Redrive.
CREATE FUNCTION {{schema}}.redrive(p_domain bytea, p_off bigint, p_now timestamptz, p {{schema}}.policy)
RETURNS {{schema}}.answer
LANGUAGE plpgsql AS $$
DECLARE
	c record;
	evs {{schema}}.event[];
BEGIN
	p_now := coalesce(p_now, clock_timestamp());
	SELECT * INTO c FROM {{schema}}._open(p_domain, false, p_now, p);
	IF c.d IS NULL THEN
		RETURN {{schema}}._absent();
	END IF;
	evs := c.evs;
	DELETE FROM {{schema}}.dead_letters x WHERE x.domain = p_domain AND x.off = p_off;
	IF NOT FOUND THEN
		RETURN {{schema}}._finish(p_domain, 0::smallint, 6::smallint, NULL, 0, evs, p_now);
	END IF;
	UPDATE {{schema}}.domains SET failed = failed - 1 WHERE domain = p_domain;
	PERFORM {{schema}}._push(p_domain, p_off, true);
	evs := evs || ROW(12, p_off, 0, 0, 0)::{{schema}}.event;
	RETURN {{schema}}._finish(p_domain, 0::smallint, 0::smallint, NULL, 0, evs, p_now);
END $$;

-- force_release is ForceRelease.
CREATE FUNCTION {{schema}}.force_release(p_domain bytea, p_now timestamptz, p {{schema}}.policy)
RETURNS {{schema}}.answer
LANGUAGE plpgsql AS $$
DECLARE
	c record;
	d {{schema}}.domains;
	evs {{schema}}.event[];
BEGIN
	p_now := coalesce(p_now, clock_timestamp());
	SELECT * INTO c FROM {{schema}}._open(p_domain, false, p_now, p);
	IF c.d IS NULL THEN
		RETURN {{schema}}._absent();
	END IF;
	d := c.d;
	evs := c.evs;
	IF d.lease_off IS NULL THEN
		RETURN {{schema}}._finish(p_domain, 0::smallint, 1::smallint, NULL, 0, evs, p_now);
	END IF;
	evs := evs || ROW(13, d.lease_off, d.lease_attempts, d.fence, 0)::{{schema}}.event;
	PERFORM {{schema}}._revoke(p_domain, d.fence, 2::smallint);
	PERFORM {{schema}}._push(p_domain, d.lease_off, true, d.lease_attempts, d.lease_retries, d.lease_acquired_at);
	evs := evs || ROW(7, d.lease_off, d.lease_attempts, 0, 0)::{{schema}}.event;
	RETURN {{schema}}._finish(p_domain, 0::smallint, 0::smallint, NULL, 0, evs, p_now);
END $$;

-- set_paused is Pause (p_paused set, creating the domain) and Resume.
CREATE FUNCTION {{schema}}.set_paused(p_domain bytea, p_paused bool, p_now timestamptz, p {{schema}}.policy)
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
		UPDATE {{schema}}.domains x SET paused = p_paused WHERE x.domain = p_domain;
		evs := evs || ROW(CASE WHEN p_paused THEN 14 ELSE 15 END, -1, 0, 0, 0)::{{schema}}.event;
	END IF;
	RETURN {{schema}}._finish(p_domain, 0::smallint, 0::smallint, NULL, 0, evs, p_now);
END $$;

-- forget is Forget: an idle, running domain with an empty backlog keeps
-- only its row's fence and serial, so that its fences go on growing if it
-- comes back; its counts join the forgotten domains'.
CREATE FUNCTION {{schema}}.forget(p_domain bytea, p_now timestamptz, p {{schema}}.policy)
RETURNS {{schema}}.answer
LANGUAGE plpgsql AS $$
DECLARE
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
	IF d.lease_off IS NOT NULL OR d.paused OR EXISTS (SELECT FROM {{schema}}.backlog b WHERE b.domain = p_domain) THEN
		RETURN {{schema}}._finish(p_domain, 0::smallint, 8::smallint, NULL, 0, evs, p_now);
	END IF;
	evs := evs || ROW(16, -1, 0, 0, 0)::{{schema}}.event;
	a := {{schema}}._finish(p_domain, 0::smallint, 0::smallint, NULL, 0, evs, p_now);
	DELETE FROM {{schema}}.dead_letters x WHERE x.domain = p_domain;
	DELETE FROM {{schema}}.payloads x WHERE x.domain = p_domain;
	UPDATE {{schema}}.meta m
	SET counts = (SELECT array_agg(u.x + u.y ORDER BY u.i) FROM unnest(m.counts, (SELECT counts FROM {{schema}}.domains x WHERE x.domain = p_domain)) WITH ORDINALITY AS u(x, y, i));
	UPDATE {{schema}}.domains x
	SET forgotten = true, processed = '{}', revoked_fence = 0, revoked_why = 0, front_pos = 0, back_pos = 0, failed = 0,
		ended_off = NULL, ended_attempts = NULL, priority = 0,
		counts = array_fill(0::bigint, ARRAY[16])
	WHERE x.domain = p_domain;
	RETURN a;
END $$;

-- reap expires up to p_limit leases due at p_now, one domain at a time,
-- skipping domains another call holds (it expires their lease itself).
CREATE FUNCTION {{schema}}.reap(p_limit int, p_now timestamptz, p {{schema}}.policy)
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
		SELECT * INTO d FROM {{schema}}.domains x WHERE x.domain = dom;
		evs := {{schema}}._expire(dom, p_now, p);
		CONTINUE WHEN cardinality(evs) = 0;
		domain := dom;
		off := d.lease_off;
		fence := d.fence;
		serial := d.serial;
		attempts := d.lease_attempts;
		dead := EXISTS (SELECT FROM {{schema}}.dead_letters x WHERE x.domain = dom AND x.off = d.lease_off);
		a := {{schema}}._finish(dom, 0::smallint, 0::smallint, NULL, 0, evs, p_now);
		RETURN NEXT;
	END LOOP;
END $$;

-- enqueue is Enqueue: try_acquire that never grants.
CREATE FUNCTION {{schema}}.enqueue(p_domain bytea, p_off bigint, p_payload bytea, p_now timestamptz, p {{schema}}.policy)
RETURNS {{schema}}.answer
LANGUAGE sql AS $$
	SELECT {{schema}}.try_acquire(p_domain, p_off, p_now, p, false, p_payload)
$$;

-- claim is Claim: it takes over up to p_limit domains whose lease is due
-- (their rows carry no offset, only the expiry's events), then leases the
-- heads of up to p_limit ready domains, highest priority first, then the
-- longest waiting, skipping domains another call holds.
CREATE FUNCTION {{schema}}.claim(p_limit int, p_now timestamptz, p {{schema}}.policy)
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
		SET fence = x.fence + 1, lease_off = t.off, lease_attempts = coalesce(t.carried_attempts, 0) + 1,
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

-- retry is Retry: the holder's attempt failed, and the offset waits at
-- the front of its domain's line until p_delay has passed, for any worker
-- to claim; past its retries it is a dead letter with p_cause instead.
-- Status 1: retried; 2: dead-lettered.
CREATE FUNCTION {{schema}}.retry(p_domain bytea, p_fence bigint, p_serial bigint, p_same bool, p_cause bytea,
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
	UPDATE {{schema}}.domains x SET ready_at = p_now + p_delay WHERE x.domain = p_domain AND NOT x.paused;
	IF FOUND AND p_delay <= interval '0' THEN -- ready now, and _finish sees no change to announce
		PERFORM {{schema}}._notify_ready(p_now, ARRAY[p_domain]);
	END IF;
	RETURN {{schema}}._finish(p_domain, 1::smallint, 0::smallint, NULL, d.lease_retries + 1, evs, p_now);
END $$;

-- enqueue_many is EnqueueMany: enqueue for each item, all in one
-- transaction, taking the domains in the order of their names (each
-- domain's items in the order given), so that batches that share domains
-- lock them in the same order and never deadlock. Rows come in that
-- order, each with its item's index, from 1.
CREATE FUNCTION {{schema}}.enqueue_many(p_domains bytea[], p_offs bigint[], p_payloads bytea[], p_now timestamptz,
	p {{schema}}.policy)
RETURNS TABLE (i int, a {{schema}}.answer)
LANGUAGE plpgsql AS $$
BEGIN
	FOR i IN SELECT u.n FROM unnest(p_domains) WITH ORDINALITY AS u(dom, n) ORDER BY u.dom, u.n LOOP
		a := {{schema}}.try_acquire(p_domains[i], p_offs[i], p_now, p, false, p_payloads[i]);
		RETURN NEXT;
	END LOOP;
END $$;

-- succeed_many is SucceedMany: it ends each holder's lease that is not due,
-- as Succeed would, without reading any backlog: a domain with offsets
-- queued becomes ready for claims, behind those ready before it. The
-- domains are locked in the order of their names first, so that batches
-- never deadlock; the update's snapshot comes after the locks. It returns
-- the leases it ended; a token it did not end is left for Succeed to
-- answer.
CREATE FUNCTION {{schema}}.succeed_many(p_domains bytea[], p_fences bigint[], p_serials bigint[], p_same bool,
	p_now timestamptz, p_monotonic bool)
RETURNS TABLE (domain bytea, off bigint, attempts int, fence bigint, at timestamptz)
LANGUAGE plpgsql AS $$
BEGIN
	p_now := coalesce(p_now, clock_timestamp());
	IF cardinality(p_domains) > 1 THEN -- one row needs no order
		PERFORM FROM {{schema}}.domains x WHERE x.domain = ANY (p_domains) ORDER BY x.domain FOR UPDATE;
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
		FROM unnest(p_domains, p_fences, p_serials) AS t(dom, fence, serial)
		WHERE x.domain = t.dom AND x.fence = t.fence AND x.serial = t.serial AND p_same AND x.lease_off IS NOT NULL
			AND (x.lease_expires_at IS NULL OR p_now < x.lease_expires_at)
		RETURNING x.domain AS dom, x.ended_off, x.ended_attempts, x.fence
	), gone AS (
		DELETE FROM {{schema}}.payloads y USING u WHERE y.domain = u.dom AND y.off = u.ended_off
	)
	SELECT u.dom, u.ended_off, u.ended_attempts, u.fence, p_now FROM u;
	-- The domains it made ready: those ended with offsets queued, whose
	-- rows this transaction wrote last.
	IF EXISTS (SELECT FROM {{schema}}.domains x WHERE x.domain = ANY (p_domains) AND x.ready_at = p_now
		AND x.lease_off IS NULL) THEN
		PERFORM {{schema}}._notify_ready(p_now, p_domains);
	END IF;
END $$;

-- set_priority is SetPriority; it creates an unknown domain, as Pause does.
CREATE FUNCTION {{schema}}.set_priority(p_domain bytea, p_priority int, p_now timestamptz, p {{schema}}.policy)
RETURNS {{schema}}.answer
LANGUAGE plpgsql AS $$
DECLARE
	c record;
BEGIN
	p_now := coalesce(p_now, clock_timestamp());
	SELECT * INTO c FROM {{schema}}._open(p_domain, true, p_now, p);
	UPDATE {{schema}}.domains x SET priority = p_priority WHERE x.domain = p_domain AND x.priority <> p_priority;
	RETURN {{schema}}._finish(p_domain, 0::smallint, 0::smallint, NULL, 0, c.evs, p_now);
END $$;

-- The statements of the pull queue's hottest functions take arrays, for
-- which PostgreSQL would plan them again on every call (custom plans);
-- their plans do not depend on the values. Planning once doubled the
-- unbatched claim-and-succeed cycle here (BenchmarkPostgresPullCycle).
ALTER FUNCTION {{schema}}.claim(int, timestamptz, {{schema}}.policy) SET plan_cache_mode = force_generic_plan;
ALTER FUNCTION {{schema}}.succeed_many(bytea[], bigint[], bigint[], bool, timestamptz, bool)
	SET plan_cache_mode = force_generic_plan;
