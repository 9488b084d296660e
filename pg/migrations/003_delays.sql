-- A retry's delay is its offset's, at the head of the domain's backlog: a
-- domain whose head Kill takes away, or Redrive puts an offset before,
-- waits no more. kill and redrive become wrappers of the functions before,
-- which lock the domain row first, note its head, and end a delay that
-- the head it had was waiting out.

-- _end_delay makes domain ready at p_now if it waits for a delay to end
-- and its backlog's head is no longer p_head, and tells waiting claims.
CREATE FUNCTION {{schema}}._end_delay(p_domain bytea, p_head bigint, p_now timestamptz) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
	UPDATE {{schema}}.domains x SET ready_at = p_now
	WHERE x.domain = p_domain AND x.ready_at > p_now
		AND (SELECT b.off FROM {{schema}}.backlog b WHERE b.domain = p_domain ORDER BY b.pos LIMIT 1) IS DISTINCT FROM p_head;
	IF FOUND THEN
		PERFORM {{schema}}._notify_ready(p_now, ARRAY[p_domain]);
	END IF;
END $$;

-- _head_locked locks domain's row, if it has one, and returns its
-- backlog's head.
CREATE FUNCTION {{schema}}._head_locked(p_domain bytea) RETURNS bigint
LANGUAGE plpgsql AS $$
BEGIN
	PERFORM FROM {{schema}}.domains x WHERE x.domain = p_domain FOR UPDATE;
	RETURN (SELECT b.off FROM {{schema}}.backlog b WHERE b.domain = p_domain ORDER BY b.pos LIMIT 1);
END $$;

ALTER FUNCTION {{schema}}.kill(bytea, bigint, bytea, bool, timestamptz, {{schema}}.policy) RENAME TO _kill_keeping_delay;

-- kill is Kill.
CREATE FUNCTION {{schema}}.kill(p_domain bytea, p_off bigint, p_reason bytea, p_create bool,
	p_now timestamptz, p {{schema}}.policy)
RETURNS {{schema}}.answer
LANGUAGE plpgsql AS $$
DECLARE
	head bigint := {{schema}}._head_locked(p_domain);
	a {{schema}}.answer;
BEGIN
	p_now := coalesce(p_now, clock_timestamp());
	a := {{schema}}._kill_keeping_delay(p_domain, p_off, p_reason, p_create, p_now, p);
	PERFORM {{schema}}._end_delay(p_domain, head, p_now);
	RETURN a;
END $$;

ALTER FUNCTION {{schema}}.redrive(bytea, bigint, timestamptz, {{schema}}.policy) RENAME TO _redrive_keeping_delay;

-- redrive is Redrive.
CREATE FUNCTION {{schema}}.redrive(p_domain bytea, p_off bigint, p_now timestamptz, p {{schema}}.policy)
RETURNS {{schema}}.answer
LANGUAGE plpgsql AS $$
DECLARE
	head bigint := {{schema}}._head_locked(p_domain);
	a {{schema}}.answer;
BEGIN
	p_now := coalesce(p_now, clock_timestamp());
	a := {{schema}}._redrive_keeping_delay(p_domain, p_off, p_now, p);
	PERFORM {{schema}}._end_delay(p_domain, head, p_now);
	RETURN a;
END $$;
