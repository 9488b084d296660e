-- A domain that allows offsets out of turn (best effort) grants a queued
-- offset asked for out of turn only once it is due: before its time it
-- stays queued, with no change, as it would at the head. try_acquire is
-- that of 007 with the check before such a grant.

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
		ELSIF h IS NOT NULL AND h <> p_off AND NOT {{schema}}._due(p_domain, p_off, p_now) THEN
			st := 3; -- queued already, and waiting for its time
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
