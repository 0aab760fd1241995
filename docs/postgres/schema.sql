-- The experiment schema: the columns of BackWave's `jobs` and `transitions` as the proposed
-- schema-postgres.sql types them (bigint milliseconds, uuid ids, jsonb labels, text states), plus
-- the two job_counts variants measured in counts.sh. Not the contract: a measuring rig.
DROP TABLE IF EXISTS transitions, jobs, job_counts, job_count_deltas CASCADE;

CREATE TABLE jobs (
    id                uuid    PRIMARY KEY,
    wire_name         text    NOT NULL CHECK (length(wire_name) > 0),
    queue             text    NOT NULL CHECK (length(queue) > 0),
    labels            jsonb   NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(labels) = 'object'),
    payload           bytea   NOT NULL DEFAULT '',
    state             text    NOT NULL DEFAULT 'scheduled'
                              CHECK (state IN ('scheduled', 'running', 'succeeded', 'dead-lettered',
                                               'quarantined', 'cancelled')),
    attempt           bigint  NOT NULL DEFAULT 0 CHECK (attempt >= 0),
    max_attempts      bigint,
    due_at            bigint  NOT NULL,
    lease_owner       text,
    lease_expires_at  bigint,
    worker_group      text,
    delay_table       jsonb,
    jitter_seed       bigint  NOT NULL DEFAULT 0,
    cancel_requested_by text,
    terminal_cause    text,
    cause_fingerprint text,
    quarantine_reason text,
    created_at        bigint  NOT NULL,
    updated_at        bigint  NOT NULL,
    finished_at       bigint,
    CHECK ((state = 'running') = (lease_owner IS NOT NULL AND lease_expires_at IS NOT NULL)),
    CHECK ((state IN ('succeeded', 'dead-lettered', 'quarantined', 'cancelled')) = (finished_at IS NOT NULL))
);
CREATE INDEX jobs_claim ON jobs (queue, due_at) WHERE state = 'scheduled';
-- Not `WHERE state = 'running'` as in schema.sql: with that predicate the fence's
-- `WHERE id = $1 AND state = 'running' AND …` matches the index too, the planner prefers the
-- small partial index to the primary key, and walks every (dead) entry of it per completion.
-- `lease_expires_at IS NOT NULL` is implied by the reap's `lease_expires_at < $now` only.
-- Set LEASE_INDEX=state to measure the schema.sql predicate (cycle.sh's first table).
CREATE INDEX jobs_lease ON jobs (lease_expires_at) WHERE lease_expires_at IS NOT NULL;
CREATE INDEX jobs_finished ON jobs (state, finished_at) WHERE finished_at IS NOT NULL;

CREATE TABLE transitions (
    seq        bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    -- The writing transaction: entries are delivered in (xid, seq) order, and only below the
    -- oldest running transaction (logorder.sh).
    xid        xid8   NOT NULL DEFAULT pg_current_xact_id(),
    job_id     uuid   NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    at         bigint NOT NULL,
    from_state text,
    to_state   text   NOT NULL,
    attempt    bigint NOT NULL,
    worker_id  text,
    actor      text,
    reason     text
);
CREATE INDEX transitions_job ON transitions (job_id, seq);
CREATE INDEX transitions_xid ON transitions (xid, seq);

CREATE TABLE job_counts (
    queue text   NOT NULL,
    state text   NOT NULL,
    n     bigint NOT NULL,
    PRIMARY KEY (queue, state)
);
CREATE TABLE job_count_deltas (
    queue text   NOT NULL,
    state text   NOT NULL,
    d     bigint NOT NULL
);

-- Milliseconds since the epoch from the database clock (the statement's transaction start).
CREATE OR REPLACE FUNCTION bw_now_ms() RETURNS bigint LANGUAGE sql STABLE
    AS $$ SELECT (extract(epoch FROM now()) * 1000)::bigint $$;
