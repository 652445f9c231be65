-- Version 3: a run's summary keeps its controls (SPEC §10): its budget, what it spent, and
-- the cancel or pause in force, as JSON in one column (NULL for a run with none of them), so
-- that a listing shows them without reading a journal. Rows written before have none; a
-- run with a control signal or a budget gets it at its next append.

ALTER TABLE runs ADD COLUMN controls text;

CREATE OR REPLACE FUNCTION set_summary(p_run_id text, p jsonb) RETURNS void
LANGUAGE sql AS $$
    UPDATE runs SET status = p->>'status', steps = (p->>'steps')::integer,
        model_calls = (p->>'model_calls')::integer,
        started_at = (p->>'started_at')::double precision,
        last_activity = (p->>'last_activity')::double precision,
        waiting_on = p->>'waiting_on', error = p->>'error', answer = p->>'answer',
        pending = p->>'pending', indeterminate = p->>'indeterminate',
        signals = (p->>'signals')::integer, forked_from = p->>'forked_from',
        controls = p->>'controls'
    WHERE run_id = p_run_id
$$;

INSERT INTO schema_version (version) VALUES (3);
