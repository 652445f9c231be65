-- Version 4: who is working, and who was told (SPEC §11). ``workers``: one row per worker
-- process, replaced at each beat (its registration as JSON, and the beat's time for
-- ordering); ``notices``: each notice (run, transition seq, kind, target) claimed before it
-- is sent and marked once sent, so two notifiers never send one twice.

CREATE TABLE workers (
    owner text COLLATE "C" PRIMARY KEY,
    info jsonb NOT NULL,
    beat_at double precision NOT NULL
);

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

INSERT INTO schema_version (version) VALUES (4);
