-- Every query the PostgresStore sends, by name (see postgres_sql.py). Parameters are named
-- (%(name)s); {schema} is the store's schema, filled in as an identifier, never as text.
-- Every connection sets search_path to the store's schema, so table names are unqualified.

-- name: configure
-- A new connection: the store's schema first on the search path; is commit durable? And a
-- session idle inside a transaction (its client paused between two round trips of an append,
-- the run's row locked) is ended by the server after idle_ms milliseconds.
SELECT set_config('search_path', %(search_path)s, false),
       current_setting('synchronous_commit') AS synchronous_commit,
       set_config('idle_in_transaction_session_timeout', %(idle_ms)s, false);

-- name: schema_exists
SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = %(schema)s);

-- name: has_version
-- Does the schema hold a durableagent store (its version table)?
SELECT to_regclass(format('%%I.schema_version', %(schema)s::text)) IS NOT NULL;

-- name: schema_tables
-- How many tables a schema without a version table holds (an empty one may become a store).
SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = %(schema)s;

-- name: read_version
SELECT max(version) FROM {schema}.schema_version;

-- name: create_lock
-- Serialises the processes creating or migrating one store.
SELECT pg_advisory_xact_lock(hashtext('durableagent schema ' || %(schema)s));

-- name: create_schema
CREATE SCHEMA IF NOT EXISTS {schema};

-- name: use_schema
SET LOCAL search_path TO {schema};

-- name: load
SELECT line FROM records WHERE run_id = %(run_id)s ORDER BY seq;

-- name: load_since
SELECT line FROM records WHERE run_id = %(run_id)s AND seq > %(after)s ORDER BY seq;

-- name: run_ids
SELECT run_id FROM runs WHERE last_seq > 0 ORDER BY run_id;

-- name: lock_state
-- The run's state under its row lock (the row is made if new).
SELECT last_seq, version, fold, outcome, holder_epoch FROM lock_run(%(run_id)s);

-- name: state
SELECT last_seq, version, fold, outcome FROM runs WHERE run_id = %(run_id)s;

-- name: append
-- Append records computed from the run's state as this process last saw it (``version``,
-- seqs from its last seq + 1: a read step's start travels with its result). One statement, so with autocommit one round trip and one
-- transaction: the UPDATE takes the run's row lock and lands only if the run is still at that
-- state and, with ``epoch``, that epoch still holds its lease; the record goes in under the
-- lock. Answers the run's new version, or NULL when nothing was written (the caller then
-- appends under the lock, which tells stale from fenced off). NOTIFY carries the run id,
-- never the record (payloads stop at 8000 bytes). {commit} is NULL, or async_commit.
WITH updated AS (
    UPDATE runs SET last_seq = %(last)s, version = version + 1, fold = %(fold)s,
        status = %(status)s, steps = %(steps)s, model_calls = %(model_calls)s,
        started_at = %(started_at)s, last_activity = %(last_activity)s,
        waiting_on = %(waiting_on)s, error = %(error)s,
        answer = %(answer)s, pending = %(pending)s, indeterminate = %(indeterminate)s,
        signals = %(signals)s, forked_from = %(forked_from)s,
        controls = %(controls)s
    WHERE run_id = %(run_id)s AND last_seq = %(first)s - 1 AND version = %(version)s
      AND (%(epoch)s::bigint IS NULL OR holder_epoch = %(epoch)s::bigint)
    RETURNING version
), inserted AS (
    INSERT INTO records (run_id, seq, line)
    SELECT %(run_id)s, t.seq, t.line
    FROM updated, unnest(%(seqs)s::bigint[], %(lines)s::bytea[]) AS t(seq, line)
    RETURNING seq
)
SELECT (SELECT version FROM updated),
       (SELECT count(pg_notify(%(channel)s, %(run_id)s)) FROM inserted),
       {commit};

-- name: async_commit
-- An append with sync=False: this transaction's commit need not wait for the disk.
set_config('synchronous_commit', 'off', true);

-- name: lock_row
-- After a lost connection, first: take the run's row lock, so that an unfinished transaction
-- of the lost session is waited for (commits or rolls back) before line_at looks.
SELECT 1 FROM runs WHERE run_id = %(run_id)s FOR UPDATE;

-- name: line_at
-- Then, in the same transaction but a statement of its own (READ COMMITTED takes a snapshot
-- per statement: one taken before the lock's wait would miss a commit made during it): did
-- the append in flight land?
SELECT line FROM records WHERE run_id = %(run_id)s AND seq = %(seq)s;

-- name: summaries
-- Every run's status line (kept at each append, a column per field) and whether its lease is
-- held now.
SELECT run_id, status, steps, model_calls, started_at, last_activity, last_seq, waiting_on,
       error, answer, pending, indeterminate, signals, forked_from, controls,
       -- most runs have no holder: the function (and its look at pg_locks) only for the rest
       CASE WHEN holder IS NULL THEN false
            ELSE lease_held(holder, expires_at) END
FROM runs WHERE last_seq > 0 ORDER BY run_id;

-- name: summary
SELECT run_id, status, steps, model_calls, started_at, last_activity, last_seq, waiting_on,
       error, answer, pending, indeterminate, signals, forked_from, controls,
       lease_held(holder, expires_at)
FROM runs WHERE run_id = %(run_id)s AND last_seq > 0;

-- name: store_summary
-- A summary rebuilt from the journal (it was missing), unless the run moved meanwhile.
UPDATE runs SET fold = %(fold)s, version = version + 1,
    status = %(status)s, steps = %(steps)s, model_calls = %(model_calls)s,
    started_at = %(started_at)s, last_activity = %(last_activity)s,
    waiting_on = %(waiting_on)s, error = %(error)s,
    answer = %(answer)s, pending = %(pending)s, indeterminate = %(indeterminate)s,
    signals = %(signals)s, forked_from = %(forked_from)s,
        controls = %(controls)s
WHERE run_id = %(run_id)s AND version = %(version)s;

-- name: take_lease
SELECT * FROM take_lease(
    %(run_id)s, %(owner)s, %(since)s, %(ttl)s, %(channel)s);

-- name: renew_lease
UPDATE runs SET expires_at = clock_timestamp() + make_interval(secs => %(ttl)s)
WHERE run_id = %(run_id)s AND holder_epoch = %(epoch)s
RETURNING true;

-- name: release_lease
SELECT release_lease(%(run_id)s, %(epoch)s, %(at)s, %(channel)s);

-- name: free_lease
-- Free the lease of an attempt whose end is recorded (or must not be: a test standing in for
-- a killed holder), if epoch still holds it; its attempt row is left as it is.
WITH freed AS (
    UPDATE runs SET holder = NULL, holder_epoch = NULL, holder_since = NULL,
        holder_ttl = NULL, expires_at = NULL
    WHERE run_id = %(run_id)s AND holder_epoch = %(epoch)s
    RETURNING run_id
)
SELECT count(pg_notify(%(channel)s, run_id)) FROM freed;

-- name: lease_holder
SELECT holder, holder_epoch, holder_since, holder_ttl
FROM runs WHERE run_id = %(run_id)s AND lease_held(holder, expires_at);

-- name: end_attempt
SELECT * FROM end_attempt(
    %(run_id)s, %(epoch)s, %(lease)s, %(version)s, %(at)s, %(ended)s, %(last_seq)s,
    %(outcome)s, %(summary)s, %(channel)s);

-- name: last_outcome
SELECT outcome FROM runs WHERE run_id = %(run_id)s;

-- name: attempts
-- Every attempt, and the epoch holding the lease now (an attempt that never ended and is not
-- that one is lost).
SELECT a.number, a.owner, a.epoch, a.started_at, a.first_seq, a.ended_at, a.last_seq,
       a.ended, a.outcome,
       (SELECT r.holder_epoch FROM runs r
        WHERE r.run_id = a.run_id AND lease_held(r.holder, r.expires_at))
FROM attempts a WHERE a.run_id = %(run_id)s ORDER BY a.number;

-- name: read_failures
SELECT failures FROM runs WHERE run_id = %(run_id)s;

-- name: set_failures
SELECT set_failures(%(run_id)s, %(failures)s, %(channel)s);

-- name: export_lines
SELECT seq, line FROM records WHERE run_id = %(run_id)s ORDER BY seq;

-- name: import_record
INSERT INTO records (run_id, seq, line) VALUES (%(run_id)s, %(seq)s, %(line)s);

-- name: clear_attempts
DELETE FROM attempts WHERE run_id = %(run_id)s;

-- name: import_attempt
INSERT INTO attempts (run_id, number, owner, epoch, started_at, first_seq, ended_at,
                      last_seq, ended, outcome)
VALUES (%(run_id)s, %(number)s, %(owner)s, %(epoch)s, %(started_at)s, %(first_seq)s,
        %(ended_at)s, %(last_seq)s, %(ended)s, %(outcome)s);

-- name: import_run
UPDATE runs SET last_seq = %(last_seq)s, version = version + 1, fold = %(fold)s,
    outcome = %(outcome)s, epoch = greatest(epoch, %(epoch)s),
    status = %(status)s, steps = %(steps)s, model_calls = %(model_calls)s,
    started_at = %(started_at)s, last_activity = %(last_activity)s,
    waiting_on = %(waiting_on)s, error = %(error)s,
    answer = %(answer)s, pending = %(pending)s, indeterminate = %(indeterminate)s,
    signals = %(signals)s, forked_from = %(forked_from)s,
        controls = %(controls)s
WHERE run_id = %(run_id)s;

-- name: notify
SELECT pg_notify(%(channel)s, %(run_id)s);

-- name: begin
BEGIN;

-- name: commit
COMMIT;

-- name: rollback
ROLLBACK;

-- name: beat
-- A worker's registration, replacing its last one.
INSERT INTO workers (owner, info, beat_at) VALUES (%(owner)s, %(info)s, %(beat_at)s)
ON CONFLICT (owner) DO UPDATE SET info = excluded.info, beat_at = excluded.beat_at;

-- name: workers
SELECT owner, info FROM workers ORDER BY owner;

-- name: forget_worker
DELETE FROM workers WHERE owner = %(owner)s;

-- name: claim_notice
-- Claim a notice: true when it was unclaimed, claimed by the same claimer (a refresh while
-- it retries), or claimed and never marked sent before ``stale`` (its claimer died before
-- sending, or between sending and marking). Never once it is marked sent.
INSERT INTO notices (run_id, seq, kind, target, claimed_by, claimed_at)
VALUES (%(run_id)s, %(seq)s, %(kind)s, %(target)s, %(by)s, %(at)s)
ON CONFLICT (run_id, seq, kind, target) DO UPDATE
    SET claimed_by = excluded.claimed_by, claimed_at = excluded.claimed_at
    WHERE notices.sent_at IS NULL
      AND (notices.claimed_by = excluded.claimed_by OR notices.claimed_at < %(stale)s)
RETURNING true;

-- name: mark_notice
UPDATE notices SET sent_at = %(at)s
WHERE run_id = %(run_id)s AND seq = %(seq)s AND kind = %(kind)s AND target = %(target)s;

-- name: notices_of
-- The notices recorded for one run (claimed or sent), oldest first.
SELECT seq, kind, target, claimed_by, claimed_at, sent_at FROM notices
WHERE run_id = %(run_id)s ORDER BY claimed_at;
