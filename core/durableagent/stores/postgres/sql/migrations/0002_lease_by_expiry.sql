-- Version 2: a lease ends by expiry or release, never by a lost connection (SPEC §7).
--
-- Version 1 freed a holder's leases the moment its session's advisory lock was gone. That
-- also happened to a live holder whose connection was cut (a terminated backend, a proxy's
-- idle timeout, a restarted server): another worker took its run over while it was inside a
-- write, and the write ran twice. Now only the expiry counts; the holder renews from a new
-- session, and a killed holder's runs are taken over once its ttl passes.

DROP FUNCTION take_lease(text, text, double precision, double precision, bigint, text);
DROP FUNCTION release_lease(text, bigint, double precision, text);
DROP FUNCTION lease_held(text, timestamptz, bigint);
DROP FUNCTION session_alive(bigint);
ALTER TABLE runs DROP COLUMN holder_token;

CREATE FUNCTION lease_held(holder text, expires_at timestamptz) RETURNS boolean
LANGUAGE sql STABLE AS $$
    SELECT holder IS NOT NULL AND expires_at > clock_timestamp()
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

INSERT INTO schema_version (version) VALUES (2);
