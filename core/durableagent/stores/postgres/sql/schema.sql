-- The PostgresStore's tables and functions, schema version 4.
--
-- Run once per store, in one transaction, with search_path set to the store's schema (names
-- here are unqualified on purpose: one file serves every schema). Every connection of a
-- PostgresStore sets the same search_path, so the functions find these tables.
--
-- A later version does not edit this file's history: it adds migrations/NNNN_what.sql (NNNN
-- the version it brings the schema to) and updates this file to the new whole.

CREATE TABLE schema_version (
    version integer PRIMARY KEY,
    applied_at timestamptz NOT NULL DEFAULT now()
);

-- One row per run: its journal's tip, its status (kept at every append, so a listing reads
-- no journal), its last outcome, its lease and the workers' failure bookkeeping. A row with
-- last_seq 0 is bookkeeping only (a lease or a failure count before any record): not a run.
CREATE TABLE runs (
    run_id text COLLATE "C" PRIMARY KEY,  -- ids are ASCII: byte order, as a listing sorts
    last_seq bigint NOT NULL DEFAULT 0,
    -- Bumped whenever fold, summary or outcome change: an append made from a cached state
    -- says which version it was computed from, and is refused (stale) if that moved.
    version bigint NOT NULL DEFAULT 0,
    fold text,           -- Fold.to_json() of the journal as JSON; NULL: rebuild it from the records
    outcome jsonb,       -- the outcome of the last attempt that ended with one
    -- The status line (fold.Summary) as if the lease were free, a column per field so that
    -- a listing reads them as they are; status NULL: rebuild it from the journal.
    status text,
    steps integer,
    model_calls integer,
    started_at double precision,
    last_activity double precision,
    waiting_on text,
    error text,
    answer text,
    pending text,        -- JSON: the pending calls, NULL when none
    indeterminate text,
    signals integer,
    forked_from text,    -- JSON: where a fork came from, NULL for a run that is none
    controls text,       -- JSON: budget, spent, the cancel or pause in force; NULL: none
    epoch bigint NOT NULL DEFAULT 0,   -- the last lease epoch given: the fencing token
    holder text,         -- the lease holder's owner name; NULL: free
    holder_epoch bigint,
    holder_since double precision,
    holder_ttl double precision,
    expires_at timestamptz,
    failures jsonb
);

-- Each record exactly as the FileStore writes its line (without the newline): the crc covers
-- these bytes, so an export is byte-identical whichever store it comes from.
CREATE TABLE records (
    run_id text COLLATE "C" NOT NULL,
    seq bigint NOT NULL,
    line bytea NOT NULL,
    PRIMARY KEY (run_id, seq)
);

-- One row per attempt: a lease acquisition, and how it ended (NULL while it runs; an attempt
-- that never says is shown as lost once its epoch no longer holds the lease).
CREATE TABLE attempts (
    run_id text COLLATE "C" NOT NULL,
    number integer NOT NULL,
    owner text NOT NULL DEFAULT '',
    epoch bigint NOT NULL,
    started_at double precision,
    first_seq bigint NOT NULL DEFAULT 0,
    ended_at double precision,
    last_seq bigint,
    ended text,
    outcome jsonb,
    PRIMARY KEY (run_id, number)
);

-- One row per worker process: its registration (roster.WorkerInfo as JSON), replaced at each
-- beat, removed at its clean stop.
CREATE TABLE workers (
    owner text COLLATE "C" PRIMARY KEY,
    info jsonb NOT NULL,
    beat_at double precision NOT NULL
);

-- Each notice to a human (run, the seq of the transition it tells, kind, target): claimed
-- before it is sent, marked sent after; a claim never marked may be taken again once stale.
CREATE TABLE notices (
    run_id text COLLATE "C" NOT NULL,
    seq bigint NOT NULL,
    kind text NOT NULL,
    target text NOT NULL,
    claimed_by text NOT NULL,
    claimed_at double precision NOT NULL,
    sent_at double precision,
    PRIMARY KEY (run_id, seq, kind, target)
);

-- True while a run's lease is held: a holder whose expiry has not passed. A lease ends by
-- expiry or release, never by a lost connection: a live holder whose session was cut (a
-- terminated backend, a proxy's timeout, a restarted server) renews it from a new one.
CREATE FUNCTION lease_held(holder text, expires_at timestamptz) RETURNS boolean
LANGUAGE sql STABLE AS $$
    SELECT holder IS NOT NULL AND expires_at > clock_timestamp()
$$;

-- Set the run's status line from a JSON object of its fields (the columns above, by name).
CREATE FUNCTION set_summary(p_run_id text, p jsonb) RETURNS void
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

-- Lock the run's row, creating it if new.
CREATE FUNCTION lock_run(p_run_id text) RETURNS runs
LANGUAGE plpgsql AS $$
DECLARE
    r runs;
BEGIN
    SELECT * INTO r FROM runs WHERE run_id = p_run_id FOR UPDATE;
    IF NOT FOUND THEN
        INSERT INTO runs (run_id) VALUES (p_run_id) ON CONFLICT DO NOTHING;
        SELECT * INTO r FROM runs WHERE run_id = p_run_id FOR UPDATE;
    END IF;
    RETURN r;
END
$$;

-- Take the run's lease if it is free or expired: the next epoch, and a new attempt starting
-- at the next seq. Otherwise 'busy' and the holder.
CREATE FUNCTION take_lease(
    p_run_id text, p_owner text, p_since double precision, p_ttl double precision,
    p_channel text
) RETURNS TABLE (
    result text, epoch bigint, holder text, holder_since double precision,
    last_seq bigint, version bigint, fold text, outcome jsonb
)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    r runs;
BEGIN
    r := lock_run(p_run_id);
    IF lease_held(r.holder, r.expires_at) THEN
        RETURN QUERY SELECT 'busy', r.holder_epoch, r.holder, r.holder_since,
            r.last_seq, r.version, NULL::text, NULL::jsonb;
        RETURN;
    END IF;
    UPDATE runs SET epoch = r.epoch + 1, holder = p_owner, holder_epoch = r.epoch + 1,
        holder_since = p_since, holder_ttl = p_ttl,
        expires_at = clock_timestamp() + make_interval(secs => p_ttl)
    WHERE run_id = p_run_id;
    INSERT INTO attempts (run_id, number, owner, epoch, started_at, first_seq)
    VALUES (
        p_run_id,
        (SELECT coalesce(max(a.number), 0) + 1 FROM attempts a WHERE a.run_id = p_run_id),
        p_owner, r.epoch + 1, p_since, r.last_seq + 1
    );
    PERFORM pg_notify(p_channel, p_run_id);
    RETURN QUERY SELECT 'ok', r.epoch + 1, p_owner, p_since,
        r.last_seq, r.version, r.fold, r.outcome;
END
$$;

-- Free the lease if epoch p_epoch still holds it, ending its attempt 'stopped' unless it
-- already ended. A lease taken over since is left alone: it is the new holder's.
CREATE FUNCTION release_lease(
    p_run_id text, p_epoch bigint, p_at double precision, p_channel text
) RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE runs SET holder = NULL, holder_epoch = NULL, holder_since = NULL,
        holder_ttl = NULL, expires_at = NULL
    WHERE run_id = p_run_id AND holder_epoch = p_epoch;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    UPDATE attempts SET ended = 'stopped', ended_at = p_at
    WHERE run_id = p_run_id AND epoch = p_epoch AND ended IS NULL;
    PERFORM pg_notify(p_channel, p_run_id);
    RETURN true;
END
$$;

-- End the attempt of epoch p_epoch (p_lease: the caller holds that lease, and must still)
-- with an outcome, and keep the run's summary up to date; stale/lost as append_record.
-- An outcome saved without a lease after its attempt ended makes an attempt of its own.
CREATE FUNCTION end_attempt(
    p_run_id text, p_epoch bigint, p_lease boolean, p_version bigint, p_at double precision,
    p_ended text, p_last_seq bigint, p_outcome jsonb, p_summary jsonb, p_channel text
) RETURNS TABLE (result text, last_seq bigint, version bigint, fold text, outcome jsonb)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    r runs;
    e bigint;
BEGIN
    r := lock_run(p_run_id);
    IF p_lease AND r.holder_epoch IS DISTINCT FROM p_epoch THEN
        RETURN QUERY SELECT 'lost', r.last_seq, r.version, NULL::text, NULL::jsonb;
        RETURN;
    END IF;
    IF r.version <> p_version THEN
        RETURN QUERY SELECT 'stale', r.last_seq, r.version, r.fold, r.outcome;
        RETURN;
    END IF;
    e := coalesce(p_epoch, r.epoch);
    UPDATE attempts SET ended = p_ended, ended_at = p_at, last_seq = p_last_seq,
        outcome = p_outcome
    WHERE run_id = p_run_id AND number = (
        SELECT max(a.number) FROM attempts a WHERE a.run_id = p_run_id AND a.epoch = e
    ) AND ended IS NULL;
    IF NOT FOUND THEN
        INSERT INTO attempts (run_id, number, epoch, ended_at, last_seq, ended, outcome)
        VALUES (
            p_run_id,
            (SELECT coalesce(max(a.number), 0) + 1 FROM attempts a WHERE a.run_id = p_run_id),
            e, p_at, p_last_seq, p_ended, p_outcome
        );
    END IF;
    UPDATE runs SET outcome = p_outcome, version = r.version + 1
    WHERE run_id = p_run_id;
    IF p_summary IS NOT NULL THEN
        PERFORM set_summary(p_run_id, p_summary);
    END IF;
    PERFORM pg_notify(p_channel, p_run_id);
    RETURN QUERY SELECT 'ok', r.last_seq, r.version + 1, NULL::text, NULL::jsonb;
END
$$;

-- Replace (or with NULL remove) the run's failure bookkeeping; true when it had some.
CREATE FUNCTION set_failures(p_run_id text, p_failures jsonb, p_channel text)
RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
    had boolean;
BEGIN
    IF p_failures IS NULL THEN
        UPDATE runs SET failures = NULL
        WHERE run_id = p_run_id AND failures IS NOT NULL;
        had := FOUND;
    ELSE
        INSERT INTO runs (run_id, failures) VALUES (p_run_id, p_failures)
        ON CONFLICT (run_id) DO UPDATE
            SET failures = excluded.failures;
        had := true;
    END IF;
    IF had THEN
        PERFORM pg_notify(p_channel, p_run_id);
    END IF;
    RETURN had;
END
$$;

INSERT INTO schema_version (version) VALUES (4);
