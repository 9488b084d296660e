-- The check of whether another domain is ready reads the index of ready
-- domains from its newest end. Its oldest entries are mostly those of
-- domains claimed since they became ready: they stay in the index, dead,
-- until vacuum removes them, and a busy queue leaves thousands of them
-- between two vacuums, which a check from the oldest end reads one by one.
CREATE OR REPLACE FUNCTION {{schema}}._notify_ready(p_now timestamptz, p_new bytea[]) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
	IF (SELECT true FROM {{schema}}.domains x WHERE x.ready_at <= p_now AND x.domain <> ALL (p_new)
		ORDER BY x.priority, x.ready_at DESC LIMIT 1) IS NULL THEN
		PERFORM pg_notify('worklease_ready', '{{schema}}');
	END IF;
END $$;
