-- BackWave store contract on PostgreSQL: the base (version 2), then one block per later version.
--
-- The same tables, columns, state spellings, millisecond times and JSON shapes as schema.sql
-- (the SQLite contract; read its comments for what each column means); a test compares the two
-- column by column. Only what PostgreSQL does differently is explained here. The `backwave`
-- library embeds this file and applies it, under an advisory lock, to an empty schema (the
-- first schema of the connection's search_path); another program may apply it with
--     psql "$URL" -v ON_ERROR_STOP=1 -1 -f schema-postgres.sql
--
-- Differences from schema.sql, each on purpose:
--   * The schema version is the one row of `backwave_schema` (SQLite: PRAGMA user_version).
--   * Ids are `uuid` (validated on input, printed lower-case hyphenated like the SQLite text).
--   * JSON columns are `jsonb`, except `failure_detail`, which is `json` so that it is shown
--     byte for byte as the worker wrote it.
--   * `transitions.xid` is the writing transaction. Sequence numbers are handed out before
--     commit, so they are not commit order: readers of the log deliver entries in (xid, seq)
--     order and only below the oldest running transaction (pg_snapshot_xmin), so that a tailing
--     reader never skips an entry that commits late.
--   * `job_counts` is kept exact by statement-level triggers that append per-statement deltas
--     to `job_count_deltas` (no row shared between writers, so no deadlock between a claim and
--     a failure); the deltas are folded into `job_counts` by one writer at a time under an
--     advisory lock. Readers add the unfolded deltas: counts are exact at every snapshot.
--   * `jobs_lease` is partial on `lease_expires_at IS NOT NULL`, not `state = 'running'`: with
--     that predicate the planner answers the fenced completion (`WHERE id = $1 AND state =
--     'running' …`) from the small lease index instead of the primary key, and walks every dead
--     entry of it since the last vacuum per completion (docs/postgres.md §3a).
--   * Times are still written by the library, from the database clock (`bw_now_ms()`), so that
--     host clock skew cannot shorten a lease.
--   * `transitions.job_id` has no foreign key (migration 12): statement triggers keep the same
--     two rules, each entry names a job and a deleted job takes its entries with it, once per
--     statement instead of a locking lookup per entry (a fifth of the server's work per job).
--   * Who did what is the server's to say (migration 4): triggers stamp the
--     authenticated role as the actor and check BackWave's grants; failure detail is read
--     through a view (type and size) and an audited function (the text).

CREATE TABLE backwave_schema (
    only_row boolean PRIMARY KEY DEFAULT true CHECK (only_row),
    version  bigint  NOT NULL CHECK (version > 0)
);
INSERT INTO backwave_schema (version) VALUES (2);

-- Milliseconds since the Unix epoch from the database clock (the transaction's start).
CREATE FUNCTION bw_now_ms() RETURNS bigint LANGUAGE sql STABLE
    AS $$ SELECT (extract(epoch FROM now()) * 1000)::bigint $$;

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
    max_attempts      bigint  CHECK (max_attempts IS NULL OR max_attempts >= 1),
    due_at            bigint  NOT NULL,
    lease_owner       text,
    lease_expires_at  bigint,
    worker_group      text,
    delay_table       jsonb,
    jitter_seed       bigint  NOT NULL DEFAULT 0,
    cancel_requested_by text,
    terminal_cause    text,
    cause_fingerprint text,
    quarantine_reason text    CHECK (quarantine_reason IS NULL
                                     OR quarantine_reason IN ('no-handler', 'undecodable-payload')),
    created_at        bigint  NOT NULL,
    updated_at        bigint  NOT NULL,
    finished_at       bigint,
    CHECK ((state = 'running') = (lease_owner IS NOT NULL AND lease_expires_at IS NOT NULL)),
    CHECK ((state IN ('succeeded', 'dead-lettered', 'quarantined', 'cancelled')) = (finished_at IS NOT NULL)),
    CHECK ((state = 'quarantined') = (quarantine_reason IS NOT NULL))
);

CREATE INDEX jobs_claim ON jobs (queue, due_at) WHERE state = 'scheduled';
CREATE INDEX jobs_lease ON jobs (lease_expires_at) WHERE lease_expires_at IS NOT NULL;
CREATE INDEX jobs_finished ON jobs (state, finished_at) WHERE finished_at IS NOT NULL;
CREATE INDEX jobs_dead_causes ON jobs (wire_name, cause_fingerprint, finished_at)
    WHERE state = 'dead-lettered';
CREATE INDEX jobs_quarantine ON jobs (wire_name, quarantine_reason, finished_at) WHERE state = 'quarantined';
CREATE INDEX jobs_active ON jobs (state, due_at) WHERE state IN ('scheduled', 'running');
CREATE INDEX jobs_claim_wire ON jobs (queue, wire_name, due_at) WHERE state = 'scheduled';

CREATE TABLE transitions (
    seq            bigint  GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
    xid            xid8    NOT NULL DEFAULT pg_current_xact_id(),
    job_id         uuid    NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    at             bigint  NOT NULL,
    from_state     text    CHECK (from_state IS NULL
                                  OR from_state IN ('scheduled', 'running', 'succeeded', 'dead-lettered',
                                                    'quarantined', 'cancelled')),
    to_state       text    NOT NULL
                           CHECK (to_state IN ('scheduled', 'running', 'succeeded', 'dead-lettered',
                                               'quarantined', 'cancelled')),
    attempt        bigint  NOT NULL CHECK (attempt >= 0),
    worker_id      text,
    actor          text,
    reason         text,
    failure_detail json,
    detail_status  text    CHECK (detail_status IS NULL OR detail_status IN ('captured', 'not-captured'))
);

CREATE INDEX transitions_job ON transitions (job_id, seq);
CREATE INDEX transitions_xid ON transitions (xid, seq);
CREATE INDEX transitions_at ON transitions (at);

CREATE TABLE workers (
    id                text    PRIMARY KEY CHECK (length(id) > 0),
    worker_group      text    NOT NULL,
    host              text    NOT NULL,
    pid               bigint  NOT NULL,
    wire_names        jsonb   NOT NULL DEFAULT '[]' CHECK (jsonb_typeof(wire_names) = 'array'),
    queues            jsonb   NOT NULL DEFAULT '[]' CHECK (jsonb_typeof(queues) = 'array'),
    started_at        bigint  NOT NULL,
    last_heartbeat_at bigint  NOT NULL,
    stale_after_ms    bigint  NOT NULL DEFAULT 30000
);

CREATE TABLE job_counts (
    queue text   NOT NULL,
    state text   NOT NULL,
    n     bigint NOT NULL,
    PRIMARY KEY (queue, state)
);

-- Appended by the triggers below, one row per (queue, state) a statement changed; folded into
-- job_counts (and deleted) by whoever holds the fold's advisory lock.
CREATE TABLE job_count_deltas (
    queue text   NOT NULL,
    state text   NOT NULL,
    d     bigint NOT NULL
);

CREATE FUNCTION bw_count_jobs() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO job_count_deltas (queue, state, d)
            SELECT queue, state, count(*) FROM new_rows GROUP BY queue, state;
    ELSIF TG_OP = 'DELETE' THEN
        INSERT INTO job_count_deltas (queue, state, d)
            SELECT queue, state, -count(*) FROM old_rows GROUP BY queue, state;
    ELSE
        INSERT INTO job_count_deltas (queue, state, d)
            SELECT queue, state, sum(d) FROM (
                SELECT queue, state, 1 AS d FROM new_rows
                UNION ALL
                SELECT queue, state, -1 AS d FROM old_rows
            ) changed
            GROUP BY queue, state
            HAVING sum(d) <> 0;
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER jobs_count_insert AFTER INSERT ON jobs
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION bw_count_jobs();
CREATE TRIGGER jobs_count_update AFTER UPDATE ON jobs
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION bw_count_jobs();
CREATE TRIGGER jobs_count_delete AFTER DELETE ON jobs
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION bw_count_jobs();

CREATE TABLE settings (
    key   text PRIMARY KEY,
    value text NOT NULL
);

CREATE TABLE grants (
    actor      text   NOT NULL,
    permission text   NOT NULL CHECK (permission IN ('view-failure-detail', 'operate', 'admin')),
    granted_by text   NOT NULL,
    granted_at bigint NOT NULL,
    PRIMARY KEY (actor, permission)
);

CREATE TABLE audit (
    seq    bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
    at     bigint NOT NULL,
    actor  text   NOT NULL,
    action text   NOT NULL,
    job_id uuid,
    detail text
);

CREATE TABLE pauses (
    kind      text   NOT NULL CHECK (kind IN ('queue', 'wire-name')),
    name      text   NOT NULL CHECK (length(name) > 0),
    paused_by text   NOT NULL,
    paused_at bigint NOT NULL,
    until     bigint,
    PRIMARY KEY (kind, name)
);

-- Later versions. Each step is one block between `-- migration N begin` and `-- migration N end`
-- (N = 3, 4, …, in order), and it ends by setting the version row to N: a writable open of an
-- older store runs the blocks it lacks, one transaction each, under the schema's advisory lock;
-- a new store runs the whole file. Steps are additive, as on SQLite, but for migration 13's
-- dropped index.

-- migration 3 begin

-- Unique jobs: the columns and index of schema.sql's migration 3, with the same meaning.
ALTER TABLE jobs ADD COLUMN unique_key text CHECK (unique_key IS NULL OR length(unique_key) > 0);
ALTER TABLE jobs ADD COLUMN unique_states bigint
    CHECK ((unique_states IS NULL) = (unique_key IS NULL) AND (unique_states IS NULL OR unique_states & 3 = 3));
ALTER TABLE jobs ADD COLUMN unique_window bigint CHECK ((unique_window IS NULL) = (unique_key IS NULL));
CREATE UNIQUE INDEX jobs_unique ON jobs (unique_key, unique_window)
    WHERE unique_key IS NOT NULL AND (unique_states & (CASE state
        WHEN 'scheduled' THEN 1 WHEN 'running' THEN 2 WHEN 'succeeded' THEN 4 WHEN 'dead-lettered' THEN 8
        WHEN 'quarantined' THEN 16 WHEN 'cancelled' THEN 32 ELSE 0 END)) <> 0;
UPDATE backwave_schema SET version = 3;

-- migration 3 end

-- migration 4 begin
-- Who did what is decided by the server (issue 24). Functions, triggers and a view only: no
-- table changes, and every statement here may run again (the migration and a fresh store alike).
--
-- The actor of every log entry, audit row, pause, grant and cancel request is the role the
-- server authenticated (`session_user`: unchanged by SET ROLE or a SECURITY DEFINER function),
-- stamped by the triggers below over whatever the client wrote. The one exception is a role the
-- server cannot restrain anyway: a superuser, the owner of these tables, or a member of that
-- owner can ALTER or DROP any table or trigger here, so its claim (the OS user running `bw`) is
-- taken as given. BackWave's own `grants` rows are checked here too, by that same name, so a
-- permission cannot be had by writing SQL past `bw`: see README "Who may do what".
--
-- Every function here pins its search_path (set below): a trigger or SECURITY DEFINER function
-- that resolved names through the caller's search_path would let the caller put a table or
-- function of its own in their place (CVE-2018-1058).

-- Whether the session's role could rewrite this store's tables regardless of any trigger: a
-- member of their owner (superusers are members of every role). The owner is written in as a
-- constant, so that the function is inlined into the triggers' WHEN clauses and costs a store
-- owner's bulk actions next to nothing (a catalog lookup per row cost 4 us); its names are
-- schema-qualified because an inlined body is read under the caller's search_path. Changing
-- the owner of the tables means running this block again.
DO $$
BEGIN
    EXECUTE format(
        'CREATE OR REPLACE FUNCTION bw_trusted() RETURNS boolean LANGUAGE sql STABLE
             AS $f$ SELECT pg_catalog.pg_has_role(session_user, %s::pg_catalog.oid, ''MEMBER'') $f$',
        (SELECT c.relowner FROM pg_class c WHERE c.oid = format('%I.backwave_schema', current_schema())::regclass));
END
$$;

-- The actor the server vouches for: the authenticated role, or a trusted role's own claim.
CREATE OR REPLACE FUNCTION bw_actor(claimed text) RETURNS text LANGUAGE sql STABLE AS $$
    SELECT CASE WHEN claimed IS NOT NULL AND bw_trusted() THEN claimed ELSE session_user::text END
$$;

-- Whether the session's actor holds `permission` in `grants` (admin implies every permission).
-- SECURITY DEFINER: a worker may not read `grants`, yet its writes are checked against it.
-- (`wanted`, not `permission`: in a SQL function a column of that name would win over it.)
CREATE OR REPLACE FUNCTION bw_may(wanted text) RETURNS boolean LANGUAGE sql STABLE SECURITY DEFINER AS $$
    SELECT bw_trusted() OR EXISTS (SELECT 1 FROM grants g
                                   WHERE g.actor = session_user AND g.permission IN (wanted, 'admin'))
$$;

CREATE OR REPLACE FUNCTION bw_require(wanted text) RETURNS void LANGUAGE plpgsql STABLE AS $$
BEGIN
    IF NOT bw_may(wanted) THEN
        RAISE EXCEPTION 'permission denied: % lacks the ''%'' permission', session_user, wanted
            USING ERRCODE = 'insufficient_privilege';
    END IF;
END
$$;

-- Stamps the actor column of the row being written with bw_actor(), after checking that the
-- actor holds the permission the row stands for.
CREATE OR REPLACE FUNCTION bw_stamp_actor() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF bw_trusted() THEN
        RETURN NEW;
    END IF;
    IF TG_TABLE_NAME = 'transitions' THEN
        -- A worker ends a job an operator asked to stop under that operator's name: the name
        -- this trigger stamped on the request, not one the worker chose.
        IF NEW.to_state = 'cancelled'
           AND NEW.actor = (SELECT j.cancel_requested_by FROM jobs j WHERE j.id = NEW.job_id) THEN
            RETURN NEW;
        END IF;
        PERFORM bw_require('operate');
        NEW.actor := session_user;
    ELSIF TG_TABLE_NAME = 'audit' THEN
        PERFORM bw_require(CASE WHEN NEW.action IN ('grant', 'revoke', 'config') THEN 'admin'
                                WHEN NEW.action = 'reveal-failure-detail' THEN 'view-failure-detail'
                                ELSE 'operate' END);
        NEW.actor := session_user;
        NEW.at := bw_now_ms();
    ELSIF TG_TABLE_NAME = 'pauses' THEN
        PERFORM bw_require('operate');
        NEW.paused_by := session_user;
    ELSIF TG_TABLE_NAME = 'grants' THEN
        PERFORM bw_require('admin');
        NEW.granted_by := session_user;
    ELSIF TG_TABLE_NAME = 'jobs' THEN
        PERFORM bw_require('operate');
        NEW.cancel_requested_by := session_user;
    END IF;
    RETURN NEW;
END
$$;

-- Writes that need `admin` (grants, settings) or `operate` (anything a worker does not do to a
-- job: requeue, cancel, run now, deleting a job that has not finished) and name no actor.
CREATE OR REPLACE FUNCTION bw_check_write() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM bw_require(TG_ARGV[0]);
    RETURN CASE TG_OP WHEN 'DELETE' THEN OLD ELSE NEW END;
END
$$;

DROP TRIGGER IF EXISTS transitions_actor ON transitions;
CREATE TRIGGER transitions_actor BEFORE INSERT ON transitions
    FOR EACH ROW WHEN (NEW.actor IS NOT NULL AND NOT bw_trusted()) EXECUTE FUNCTION bw_stamp_actor();
DROP TRIGGER IF EXISTS audit_actor ON audit;
CREATE TRIGGER audit_actor BEFORE INSERT ON audit FOR EACH ROW WHEN (NOT bw_trusted())
    EXECUTE FUNCTION bw_stamp_actor();
DROP TRIGGER IF EXISTS pauses_actor ON pauses;
CREATE TRIGGER pauses_actor BEFORE INSERT OR UPDATE ON pauses FOR EACH ROW EXECUTE FUNCTION bw_stamp_actor();
DROP TRIGGER IF EXISTS pauses_delete ON pauses;
CREATE TRIGGER pauses_delete BEFORE DELETE ON pauses FOR EACH ROW EXECUTE FUNCTION bw_check_write('operate');
DROP TRIGGER IF EXISTS grants_actor ON grants;
CREATE TRIGGER grants_actor BEFORE INSERT OR UPDATE ON grants FOR EACH ROW EXECUTE FUNCTION bw_stamp_actor();
DROP TRIGGER IF EXISTS grants_delete ON grants;
CREATE TRIGGER grants_delete BEFORE DELETE ON grants FOR EACH ROW EXECUTE FUNCTION bw_check_write('admin');
DROP TRIGGER IF EXISTS settings_write ON settings;
CREATE TRIGGER settings_write BEFORE INSERT OR UPDATE OR DELETE ON settings
    FOR EACH ROW EXECUTE FUNCTION bw_check_write('admin');
DROP TRIGGER IF EXISTS jobs_cancel_request ON jobs;
CREATE TRIGGER jobs_cancel_request BEFORE UPDATE OF cancel_requested_by ON jobs FOR EACH ROW
    WHEN (NEW.cancel_requested_by IS NOT NULL AND NEW.cancel_requested_by IS DISTINCT FROM OLD.cancel_requested_by
          AND NOT bw_trusted())
    EXECUTE FUNCTION bw_stamp_actor();
DROP TRIGGER IF EXISTS jobs_cancel_request_insert ON jobs;
CREATE TRIGGER jobs_cancel_request_insert BEFORE INSERT ON jobs FOR EACH ROW
    WHEN (NEW.cancel_requested_by IS NOT NULL AND NOT bw_trusted()) EXECUTE FUNCTION bw_stamp_actor();
-- What a worker does to a job (claim, heartbeat, complete, retry, reap) changes a Scheduled or
-- Running job and never ends one Cancelled unasked; the sweep deletes finished jobs. Anything
-- else is an operator's. The WHEN clauses keep the engine's own updates off this trigger.
DROP TRIGGER IF EXISTS jobs_operator_update ON jobs;
CREATE TRIGGER jobs_operator_update BEFORE UPDATE ON jobs FOR EACH ROW
    WHEN ((OLD.state NOT IN ('scheduled', 'running')
           OR (NEW.state = 'cancelled' AND NEW.cancel_requested_by IS NULL)
           OR (OLD.state = 'scheduled' AND NEW.state = 'scheduled'))
          AND NOT bw_trusted())
    EXECUTE FUNCTION bw_check_write('operate');
DROP TRIGGER IF EXISTS jobs_operator_delete ON jobs;
CREATE TRIGGER jobs_operator_delete BEFORE DELETE ON jobs FOR EACH ROW
    WHEN (OLD.finished_at IS NULL AND NOT bw_trusted()) EXECUTE FUNCTION bw_check_write('operate');

-- The type and size of each entry's failure detail, never its text: what a role without
-- `view-failure-detail` is shown (`hidden: panic, 449 B`). No role but the owner is granted
-- SELECT on `transitions.failure_detail` (README); this view reads it with its owner's rights.
CREATE OR REPLACE VIEW bw_failure_detail_shapes AS
    SELECT seq, failure_detail ->> 'type' AS kind, octet_length(failure_detail::text) AS bytes
    FROM transitions WHERE failure_detail IS NOT NULL;

-- The failure detail of a job's entries, for an actor holding `view-failure-detail`, audited in
-- the same transaction: the only way to it for a role that may not read the column, so no
-- reveal goes unaudited. `at` and `claimed` count only for a trusted role (see bw_actor).
CREATE OR REPLACE FUNCTION bw_reveal_failure_detail(job uuid, at bigint, claimed text)
    RETURNS TABLE (seq bigint, detail text) LANGUAGE plpgsql SECURITY DEFINER AS $$
DECLARE
    who text := bw_actor(claimed);
    n bigint;
BEGIN
    IF NOT bw_may('view-failure-detail') THEN
        RAISE EXCEPTION 'permission denied: % lacks the ''view-failure-detail'' permission', who
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF coalesce((SELECT s.value FROM settings s WHERE s.key = 'failure_detail'), 'on') = 'off' THEN
        RAISE EXCEPTION 'failure detail is switched off for this store' USING ERRCODE = 'insufficient_privilege';
    END IF;
    RETURN QUERY SELECT t.seq, t.failure_detail::text FROM transitions t
                 WHERE t.job_id = job AND t.failure_detail IS NOT NULL ORDER BY t.seq;
    GET DIAGNOSTICS n = ROW_COUNT;
    -- The wording of store/admin.rs `revealed`.
    INSERT INTO audit (at, actor, action, job_id, detail)
        VALUES (CASE WHEN bw_trusted() THEN coalesce(at, bw_now_ms()) ELSE bw_now_ms() END, who,
                'reveal-failure-detail', job, n || ' entries');
END
$$;

-- bw_now_ms and bw_trusted stay unpinned so that they can be inlined into the statements that
-- call them; they name only built-in functions.
DO $$
DECLARE f regprocedure;
BEGIN
    FOR f IN SELECT p.oid::regprocedure FROM pg_proc p
             WHERE p.pronamespace = current_schema()::regnamespace AND p.proname LIKE 'bw\_%'
               AND p.proname NOT IN ('bw_now_ms', 'bw_trusted')
    LOOP
        EXECUTE format('ALTER FUNCTION %s SET search_path = %I, pg_temp', f, current_schema());
    END LOOP;
END
$$;
-- Every statement above may also simply run again on an open store: no table changes.
UPDATE backwave_schema SET version = 4;

-- migration 4 end

-- migration 5 begin
-- The payload limit, for every program that writes jobs (schema.sql explains it). The
-- insert check runs once per statement over its new rows (sharing the transition table of the
-- count trigger), so a COPY of a million rows pays one scan, not a call per row; the update check
-- runs only for an UPDATE that sets `payload`, so a job stored under a higher limit still runs.
-- Both are AFTER triggers: a BEFORE row trigger would make every UPDATE of a job (each claim and
-- completion) fetch and lock the row once more before its column list is even looked at.
-- SECURITY DEFINER: a role that may enqueue need not read `settings`.
CREATE FUNCTION bw_payload_limit() RETURNS bigint LANGUAGE sql STABLE SECURITY DEFINER AS $$
    SELECT coalesce((SELECT CASE WHEN value ~ '^[0-9]{1,18}$' THEN value::bigint END
                     FROM settings WHERE key = 'payload_limit'), 1048576)
$$;

CREATE FUNCTION bw_check_payloads() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    lim     bigint := bw_payload_limit();
    largest bigint;
BEGIN
    IF TG_OP = 'INSERT' THEN
        SELECT max(octet_length(payload)) INTO largest FROM new_rows;
    ELSE
        largest := octet_length(NEW.payload);
    END IF;
    IF largest > lim THEN
        RAISE EXCEPTION 'backwave: a payload of % bytes is over the store''s payload_limit of % bytes', largest, lim
            USING ERRCODE = 'program_limit_exceeded';
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER jobs_payload_limit_insert AFTER INSERT ON jobs
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION bw_check_payloads();
CREATE TRIGGER jobs_payload_limit_update AFTER UPDATE OF payload ON jobs
    FOR EACH ROW EXECUTE FUNCTION bw_check_payloads();

-- Pinned like migration 4's functions: never resolved through the caller's search_path.
DO $$
DECLARE
    f text;
BEGIN
    FOREACH f IN ARRAY ARRAY['bw_payload_limit()', 'bw_check_payloads()']
    LOOP
        EXECUTE format('ALTER FUNCTION %s SET search_path = %I, pg_temp', f, current_schema());
    END LOOP;
END
$$;
UPDATE backwave_schema SET version = 5;

-- migration 5 end

-- migration 6 begin
-- Limits and quiet workers (schema.sql's migration 6 says what each means).
CREATE TABLE limits (
    kind           text   NOT NULL CHECK (kind IN ('queue', 'wire-name')),
    name           text   NOT NULL CHECK (length(name) > 0),
    source         text   NOT NULL CHECK (source IN ('operator', 'application')),
    concurrency    bigint CHECK (concurrency IS NULL OR concurrency >= 1),
    rate           bigint CHECK (rate IS NULL OR rate >= 1),
    rate_window_ms bigint CHECK (rate_window_ms IS NULL OR rate_window_ms >= 1),
    set_by         text   NOT NULL,
    set_at         bigint NOT NULL,
    until          bigint,
    PRIMARY KEY (kind, name, source),
    CHECK ((rate IS NULL) = (rate_window_ms IS NULL)),
    CHECK (concurrency IS NOT NULL OR rate IS NOT NULL)
);

CREATE TABLE limit_windows (
    kind         text   NOT NULL,
    name         text   NOT NULL,
    window_start bigint NOT NULL,
    claimed      bigint NOT NULL,
    PRIMARY KEY (kind, name)
);

ALTER TABLE workers ADD COLUMN quiet_at bigint;
ALTER TABLE workers ADD COLUMN quiet_by text;
ALTER TABLE workers ADD COLUMN stopping_at bigint;

-- Who set a limit, and who quieted a worker, is the server's to say too (as migration 4 does for
-- the log, audit, pauses and grants): an operator's limit and a quiet need `operate`; an
-- application's default is written by its engine under its own role.
CREATE OR REPLACE FUNCTION bw_stamp_control() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF bw_trusted() THEN
        RETURN NEW;
    END IF;
    IF TG_TABLE_NAME = 'limits' THEN
        IF NEW.source = 'operator' THEN
            PERFORM bw_require('operate');
        END IF;
        NEW.set_by := session_user;
    ELSIF TG_TABLE_NAME = 'workers' THEN
        IF NEW.quiet_at IS DISTINCT FROM OLD.quiet_at OR NEW.quiet_by IS DISTINCT FROM OLD.quiet_by THEN
            PERFORM bw_require('operate');
            NEW.quiet_by := CASE WHEN NEW.quiet_at IS NULL THEN NULL ELSE session_user END;
        END IF;
    END IF;
    RETURN NEW;
END
$$;
CREATE TRIGGER limits_actor BEFORE INSERT OR UPDATE ON limits
    FOR EACH ROW EXECUTE FUNCTION bw_stamp_control();
CREATE TRIGGER workers_quiet_actor BEFORE UPDATE OF quiet_at, quiet_by ON workers
    FOR EACH ROW EXECUTE FUNCTION bw_stamp_control();
DO $$
BEGIN
    EXECUTE format('ALTER FUNCTION bw_stamp_control() SET search_path = %I, pg_temp', current_schema());
END
$$;
UPDATE backwave_schema SET version = 6;

-- migration 6 end

-- migration 7 begin
-- Recurring schedules (schema.sql's migration 7 says what each column means).
CREATE TABLE schedules (
    name          text    PRIMARY KEY CHECK (length(name) > 0),
    cron          text    NOT NULL,
    zone          text    NOT NULL DEFAULT 'UTC',
    wire_name     text    NOT NULL CHECK (length(wire_name) > 0),
    queue         text    NOT NULL CHECK (length(queue) > 0),
    payload       bytea   NOT NULL DEFAULT '',
    labels        jsonb   NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(labels) = 'object'),
    missed        text    NOT NULL DEFAULT 'latest' CHECK (missed IN ('latest', 'catch-up', 'skip')),
    catch_up_max  bigint  CHECK ((missed = 'catch-up') = (catch_up_max IS NOT NULL AND catch_up_max >= 1)),
    last_tick     bigint  NOT NULL,
    last_job_id   uuid,
    last_fired_at bigint,
    declared_at   bigint  NOT NULL,
    updated_at    bigint  NOT NULL,
    seen_at       bigint  NOT NULL,
    paused_by     text,
    paused_at     bigint,
    paused_until  bigint,
    CHECK ((paused_by IS NULL) = (paused_at IS NULL))
);

-- Who paused a schedule is the server's to say too (as migration 6 does for limits and quiet
-- workers): a pause or resume needs `operate`, and `paused_by` is the authenticated role. An
-- engine declaring its schedules, firing their ticks or noting that it still runs them changes
-- no pause columns and needs no BackWave permission.
CREATE OR REPLACE FUNCTION bw_stamp_schedule() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF bw_trusted() THEN
        RETURN NEW;
    END IF;
    IF TG_OP = 'INSERT' THEN
        IF NEW.paused_at IS NOT NULL OR NEW.paused_by IS NOT NULL THEN
            PERFORM bw_require('operate');
            NEW.paused_by := CASE WHEN NEW.paused_at IS NULL THEN NULL ELSE session_user END;
        END IF;
    ELSIF NEW.paused_at IS DISTINCT FROM OLD.paused_at OR NEW.paused_by IS DISTINCT FROM OLD.paused_by
          OR NEW.paused_until IS DISTINCT FROM OLD.paused_until THEN
        PERFORM bw_require('operate');
        NEW.paused_by := CASE WHEN NEW.paused_at IS NULL THEN NULL ELSE session_user END;
    END IF;
    RETURN NEW;
END
$$;
CREATE TRIGGER schedules_pause_actor BEFORE INSERT OR UPDATE ON schedules
    FOR EACH ROW EXECUTE FUNCTION bw_stamp_schedule();

-- An engine audits the schedules it declares (`schedule-declare`, `schedule-update`) under its
-- own role, as it writes its application's limits: those two actions need no BackWave
-- permission, and their actor and time are stamped all the same. Every other action stays with
-- migration 4's trigger.
CREATE OR REPLACE FUNCTION bw_stamp_declarer() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.actor := session_user;
    NEW.at := bw_now_ms();
    RETURN NEW;
END
$$;
DROP TRIGGER IF EXISTS audit_actor ON audit;
CREATE TRIGGER audit_actor BEFORE INSERT ON audit FOR EACH ROW
    WHEN (NOT bw_trusted() AND NEW.action NOT IN ('schedule-declare', 'schedule-update'))
    EXECUTE FUNCTION bw_stamp_actor();
CREATE TRIGGER audit_declare_actor BEFORE INSERT ON audit FOR EACH ROW
    WHEN (NOT bw_trusted() AND NEW.action IN ('schedule-declare', 'schedule-update'))
    EXECUTE FUNCTION bw_stamp_declarer();
DO $$
DECLARE
    f text;
BEGIN
    FOREACH f IN ARRAY ARRAY['bw_stamp_schedule()', 'bw_stamp_declarer()']
    LOOP
        EXECUTE format('ALTER FUNCTION %s SET search_path = %I, pg_temp', f, current_schema());
    END LOOP;
END
$$;
UPDATE backwave_schema SET version = 7;

-- migration 7 end

-- migration 8 begin
-- A schedule whose ticks do not pile up behind a slow job (schema.sql's migration 8 says how).
ALTER TABLE schedules ADD COLUMN unique_pending bigint NOT NULL DEFAULT 0 CHECK (unique_pending IN (0, 1));
ALTER TABLE schedules ADD COLUMN skipped_ticks bigint NOT NULL DEFAULT 0 CHECK (skipped_ticks >= 0);
UPDATE backwave_schema SET version = 8;

-- migration 8 end

-- migration 9 begin
-- Enqueue from SQL, inside the caller's own transaction (as graphile-worker's `add_job`): any
-- driver or language enqueues with the validation, unique rule, payload limit, counts and log
-- entry of the library's `Store::enqueue`, and a rollback leaves nothing. The library's
-- `enqueue_in_postgres` / `enqueue_in_tokio_postgres` call this same function.
--
--   SELECT * FROM backwave_enqueue('send-email', '{"to":"ann@example.com"}', queue => 'high');
--   -- job_id uuid, created boolean: false when a unique job's key is held, job_id is the holder
--
-- Times are the database clock's (bw_now_ms(), the transaction's start), as for the library.
-- Bad input raises SQLSTATE 22023 (invalid_parameter_value) quoting the value; a payload over
-- the limit 54000, as the trigger of migration 5 does. SECURITY DEFINER: a role granted EXECUTE
-- may enqueue without any right on the tables (README "Roles on PostgreSQL").

-- A wire name, queue or unique key as the library's `validate_name` takes it: not blank, no
-- control characters.
CREATE FUNCTION bw_check_name(what text, value text) RETURNS void LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    IF value IS NULL OR value !~ '[^[:space:]]' THEN
        RAISE EXCEPTION 'the % must not be empty', what USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF value ~ '[\x01-\x1f\x7f-\x9f]' THEN
        RAISE EXCEPTION 'the % % contains control characters', what, to_json(value)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
END
$$;

-- The payload as bytes and times as milliseconds: what the library passes.
CREATE FUNCTION backwave_enqueue_bytes(
    wire_name text, payload bytea, queue text, due_at_ms bigint DEFAULT NULL, labels jsonb DEFAULT '{}',
    unique_key text DEFAULT NULL, unique_by_payload boolean DEFAULT false, unique_states text[] DEFAULT NULL,
    unique_period_ms bigint DEFAULT NULL, OUT job_id uuid, OUT created boolean)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER AS $$
#variable_conflict use_variable
DECLARE
    now_ms  bigint := bw_now_ms();
    lim     bigint := bw_payload_limit();
    ukey    text;
    ustates bigint;
    uwindow bigint;
    mask    bigint;
    s       text;
    b       bytea;
    seed    bigint;
BEGIN
    PERFORM bw_check_name('wire name', wire_name);
    PERFORM bw_check_name('queue', queue);
    IF payload IS NULL THEN
        RAISE EXCEPTION 'the payload must not be NULL' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF labels IS NULL OR jsonb_typeof(labels) <> 'object'
       OR EXISTS (SELECT 1 FROM jsonb_each(labels) l WHERE jsonb_typeof(l.value) <> 'string') THEN
        RAISE EXCEPTION 'the labels % are not a JSON object of strings', coalesce(labels::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF octet_length(payload) > lim THEN
        RAISE EXCEPTION 'backwave: a payload of % bytes is over the store''s payload_limit of % bytes',
            octet_length(payload), lim USING ERRCODE = 'program_limit_exceeded';
    END IF;
    -- The unique rule, as store/unique.rs `validate` and `columns` make it.
    IF unique_key IS NOT NULL AND coalesce(unique_by_payload, false) THEN
        RAISE EXCEPTION 'a unique rule is by key (%) or by payload, not both', to_json(unique_key)
            USING ERRCODE = 'invalid_parameter_value';
    ELSIF unique_key IS NOT NULL OR coalesce(unique_by_payload, false) THEN
        IF unique_key IS NOT NULL THEN
            PERFORM bw_check_name('unique key', unique_key);
            ukey := unique_key;
        ELSE
            ukey := wire_name || ':' || encode(sha256(payload), 'hex');
        END IF;
        ustates := 0;
        FOREACH s IN ARRAY coalesce(unique_states, ARRAY['scheduled', 'running']) LOOP
            mask := CASE s WHEN 'scheduled' THEN 1 WHEN 'running' THEN 2 WHEN 'succeeded' THEN 4
                          WHEN 'dead-lettered' THEN 8 WHEN 'quarantined' THEN 16 WHEN 'cancelled' THEN 32 END;
            IF mask IS NULL THEN
                RAISE EXCEPTION 'unique states: % is not a state (scheduled, running, succeeded, dead-lettered, quarantined, cancelled)',
                    coalesce(to_json(s)::text, 'NULL') USING ERRCODE = 'invalid_parameter_value';
            END IF;
            ustates := ustates | mask;
        END LOOP;
        IF ustates & 3 <> 3 THEN
            RAISE EXCEPTION 'unique states ''%'' leave out %: a unique job holds its key while scheduled and running (add terminal states to keep it longer)',
                array_to_string(unique_states, ','), CASE WHEN ustates & 1 = 0 THEN 'scheduled' ELSE 'running' END
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        IF unique_period_ms IS NOT NULL AND unique_period_ms < 1 THEN
            RAISE EXCEPTION 'the unique period ''%ms'' is shorter than 1ms', unique_period_ms
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        uwindow := CASE WHEN unique_period_ms IS NULL THEN 0
                        ELSE now_ms - (((now_ms % unique_period_ms) + unique_period_ms) % unique_period_ms) END;
    ELSIF unique_states IS NOT NULL OR unique_period_ms IS NOT NULL THEN
        RAISE EXCEPTION 'unique states or a unique period need unique_key or unique_by_payload'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- As store/jobs.rs `insert_jobs`: the unique index decides (ON CONFLICT DO NOTHING, which
    -- waits for a racing insert of the key), and only then is the holder read. A holder that
    -- left its states between the two statements frees the key: try again.
    FOR round IN 1..100 LOOP
        -- A time-ordered v7 id, as the library writes; the jitter seed is its random tail.
        b := uuid_send(gen_random_uuid());
        b := overlay(b PLACING substring(int8send(now_ms) FROM 3 FOR 6) FROM 1 FOR 6);
        b := set_byte(b, 6, (get_byte(b, 6) & 15) | 112);
        job_id := encode(b, 'hex')::uuid;
        seed := ('x' || encode(substring(b FROM 9 FOR 8), 'hex'))::bit(64)::bigint;
        INSERT INTO jobs (id, wire_name, queue, labels, payload, state, due_at, jitter_seed, created_at, updated_at,
                          unique_key, unique_states, unique_window)
            VALUES (job_id, wire_name, queue, labels, payload, 'scheduled', coalesce(due_at_ms, now_ms), seed,
                    now_ms, now_ms, ukey, ustates, uwindow)
            ON CONFLICT DO NOTHING;
        IF FOUND THEN
            INSERT INTO transitions (job_id, at, from_state, to_state, attempt)
                VALUES (job_id, now_ms, NULL, 'scheduled', 0);
            created := true;
            RETURN;
        END IF;
        IF ukey IS NULL THEN
            RAISE EXCEPTION 'job id % is already taken', job_id;
        END IF;
        SELECT h.id INTO job_id FROM jobs h
            WHERE h.unique_key = ukey AND h.unique_window = uwindow AND h.unique_key IS NOT NULL
              AND (h.unique_states & (CASE h.state WHEN 'scheduled' THEN 1 WHEN 'running' THEN 2
                   WHEN 'succeeded' THEN 4 WHEN 'dead-lettered' THEN 8 WHEN 'quarantined' THEN 16
                   WHEN 'cancelled' THEN 32 ELSE 0 END)) <> 0;
        IF FOUND THEN
            created := false;
            RETURN;
        END IF;
    END LOOP;
    RAISE EXCEPTION 'the unique key ''%'' is taken, but no job holding it was found; try again', ukey;
END
$$;

-- The form for people and other languages: the payload as JSON (`json`, not `jsonb`, so that its
-- text is stored as given and a unique-by-payload key is the library's for the same text), times
-- as timestamptz and an interval.
CREATE FUNCTION backwave_enqueue(
    wire_name text, payload json, queue text DEFAULT 'default', due_at timestamptz DEFAULT NULL,
    labels jsonb DEFAULT '{}', unique_key text DEFAULT NULL, unique_by_payload boolean DEFAULT false,
    unique_states text[] DEFAULT NULL, unique_period interval DEFAULT NULL, OUT job_id uuid, OUT created boolean)
LANGUAGE sql VOLATILE SECURITY DEFINER AS $$
    SELECT e.job_id, e.created FROM backwave_enqueue_bytes(
        wire_name, convert_to(payload::text, 'UTF8'), queue, floor(extract(epoch FROM due_at) * 1000)::bigint,
        labels, unique_key, unique_by_payload, unique_states,
        floor(extract(epoch FROM unique_period) * 1000)::bigint) e
$$;

-- Nobody but the owner until granted (README "Roles on PostgreSQL"), and pinned like the others.
DO $$
DECLARE
    f text;
BEGIN
    FOREACH f IN ARRAY ARRAY['bw_check_name(text, text)',
        'backwave_enqueue_bytes(text, bytea, text, bigint, jsonb, text, boolean, text[], bigint)',
        'backwave_enqueue(text, json, text, timestamptz, jsonb, text, boolean, text[], interval)']
    LOOP
        EXECUTE format('ALTER FUNCTION %s SET search_path = %I, pg_temp', f, current_schema());
    END LOOP;
END
$$;
REVOKE ALL ON FUNCTION backwave_enqueue_bytes(text, bytea, text, bigint, jsonb, text, boolean, text[], bigint),
    backwave_enqueue(text, json, text, timestamptz, jsonb, text, boolean, text[], interval) FROM PUBLIC;
UPDATE backwave_schema SET version = 9;

-- migration 9 end

-- Version 9 -> 10: SQLite only (a listing index that keeps payload overflow pages out of the
-- lists). PostgreSQL keeps a large payload out of line (TOAST), so reading the columns of a list
-- never touches it: nothing to create here.
-- migration 10 begin
-- nothing on PostgreSQL
UPDATE backwave_schema SET version = 10;
-- migration 10 end

-- Version 10 -> 11: SQLite only (one insert trigger for the count and the payload limit, and a
-- cheaper id CHECK; issue 23).
-- migration 11 begin
-- nothing on PostgreSQL
UPDATE backwave_schema SET version = 11;
-- migration 11 end

-- Version 11 -> 12: the log's tie to its job kept per statement (issue 23). The foreign key
-- looked each new entry's job up, and locked it (FOR KEY SHARE), one entry at a time through
-- its own query: about 10 µs of server time per entry, two entries per job run, a fifth of the
-- server's work on a job. The two rules it kept are kept by these statement triggers, for every
-- program that writes the store:
--   * an entry names a job that exists: one anti-join over the statement's new entries, which
--     raises foreign_key_violation (23503) naming the first missing job. Unlike the key it
--     takes no lock on the job: every writer of the contract writes an entry in the transaction
--     that inserts or updates its job (and so already holds the row), so no delete can come
--     between;
--   * deleting a job deletes its entries (was ON DELETE CASCADE): one delete per statement.
-- Both functions are SECURITY DEFINER, as the key's checks and cascade ran with the owner's
-- rights: a role that may write an entry needs no right to read jobs for it, and one that may
-- delete a job (the retention sweep, `bw purge`) none on the log.
-- migration 12 begin
ALTER TABLE transitions DROP CONSTRAINT IF EXISTS transitions_job_id_fkey;

CREATE FUNCTION bw_check_log_jobs() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER AS $$
DECLARE
    missing uuid;
BEGIN
    SELECT n.job_id INTO missing FROM new_rows n
    WHERE NOT EXISTS (SELECT FROM jobs j WHERE j.id = n.job_id) LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'backwave: log entry for job % which is not in jobs', missing
            USING ERRCODE = 'foreign_key_violation';
    END IF;
    RETURN NULL;
END
$$;
CREATE TRIGGER transitions_job_insert AFTER INSERT ON transitions
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION bw_check_log_jobs();
CREATE TRIGGER transitions_job_update AFTER UPDATE ON transitions
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION bw_check_log_jobs();

CREATE FUNCTION bw_delete_log() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER AS $$
BEGIN
    DELETE FROM transitions t USING old_rows o WHERE t.job_id = o.id;
    RETURN NULL;
END
$$;
CREATE TRIGGER jobs_delete_log AFTER DELETE ON jobs
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION bw_delete_log();

-- Pinned like the others: never resolved through the caller's search_path.
DO $$
BEGIN
    EXECUTE format('ALTER FUNCTION bw_check_log_jobs() SET search_path = %I, pg_temp', current_schema());
    EXECUTE format('ALTER FUNCTION bw_delete_log() SET search_path = %I, pg_temp', current_schema());
END
$$;
UPDATE backwave_schema SET version = 12;
-- migration 12 end

-- Version 12 -> 13: one index fewer on the log (issue 23). `transitions_at` served one read, the
-- dashboard's first look at the last hour (`log_cursor_at`), and cost every entry an index
-- insert: about 1 µs of server time, three entries per job run (measured 1.3 s against 1.6 s for
-- 300,000 entries). That read now binary-searches the primary key for the time, as SQLite always
-- has. The one step that removes something: no program reads the index by name.
-- migration 13 begin
DROP INDEX IF EXISTS transitions_at;
UPDATE backwave_schema SET version = 13;
-- migration 13 end

-- Version 13 -> 14: wake-ups (issue 40). The count trigger also tells the workers listening on
-- the channel `backwave` which queues gained Scheduled jobs in this statement: an insert (an
-- enqueue, `backwave_enqueue`, a schedule's tick) or an update that leaves jobs Scheduled (a
-- requeue, a run-now, a retry, a hand-back). The server merges identical notifications within
-- a transaction, so a transaction sends at most one per queue, however many jobs: never one per
-- job (a NOTIFY takes a lock at commit that every notifying transaction shares). The payload is
-- JSON, `[schema, queue]`, or `[schema]` (any queue) for a queue name too long for a payload. A
-- listener hears it after the commit, never of a rollback; the notification is only a hint: a
-- worker that misses one finds the job at its next poll.
-- migration 14 begin
CREATE OR REPLACE FUNCTION bw_count_jobs() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO job_count_deltas (queue, state, d)
            SELECT queue, state, count(*) FROM new_rows GROUP BY queue, state;
    ELSIF TG_OP = 'DELETE' THEN
        INSERT INTO job_count_deltas (queue, state, d)
            SELECT queue, state, -count(*) FROM old_rows GROUP BY queue, state;
        RETURN NULL;
    ELSE
        INSERT INTO job_count_deltas (queue, state, d)
            SELECT queue, state, sum(d) FROM (
                SELECT queue, state, 1 AS d FROM new_rows
                UNION ALL
                SELECT queue, state, -1 AS d FROM old_rows
            ) changed
            GROUP BY queue, state
            HAVING sum(d) <> 0;
    END IF;
    PERFORM pg_notify('backwave', CASE WHEN octet_length(q.queue) <= 7000
                                       THEN json_build_array(current_schema(), q.queue)
                                       ELSE json_build_array(current_schema()) END::text)
        FROM (SELECT DISTINCT queue FROM new_rows WHERE state = 'scheduled') q;
    RETURN NULL;
END
$$;
-- Pinned as in migration 4 (CREATE OR REPLACE dropped the setting).
DO $$
BEGIN
    EXECUTE format('ALTER FUNCTION bw_count_jobs() SET search_path = %I, pg_temp', current_schema());
END
$$;
UPDATE backwave_schema SET version = 14;
-- migration 14 end

-- Version 14 -> 15: one trace from the request to the job (issue 41). `traceparent` is the W3C
-- trace context (https://www.w3.org/TR/trace-context/) of the span that enqueued the job, kept
-- with the job (not in its payload): the worker's attempt span continues that trace. NULL when
-- the enqueuing code had no trace. Both enqueue functions take it as a last, optional argument:
-- a new signature, so the old functions are dropped and made again, and whoever was granted
-- EXECUTE on the old ones (README "Roles on PostgreSQL") is granted it on the new ones.
-- migration 15 begin
ALTER TABLE jobs ADD COLUMN IF NOT EXISTS traceparent text
    CHECK (traceparent IS NULL OR traceparent ~ '^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$');
CREATE TEMP TABLE bw_enqueue_grants ON COMMIT DROP AS
    SELECT a.grantee::regrole::text AS grantee
    FROM pg_proc p, aclexplode(p.proacl) a
    WHERE p.oid IN (to_regprocedure('backwave_enqueue_bytes(text, bytea, text, bigint, jsonb, text, boolean, text[], bigint)'),
                    to_regprocedure('backwave_enqueue(text, json, text, timestamptz, jsonb, text, boolean, text[], interval)'))
      AND a.privilege_type = 'EXECUTE' AND a.grantee <> 0 AND a.grantee <> p.proowner
    GROUP BY a.grantee;
DROP FUNCTION IF EXISTS backwave_enqueue(text, json, text, timestamptz, jsonb, text, boolean, text[], interval);
DROP FUNCTION IF EXISTS backwave_enqueue_bytes(text, bytea, text, bigint, jsonb, text, boolean, text[], bigint);

-- The payload as bytes and times as milliseconds: what the library passes (migration 9's, and the
-- trace the job continues).
CREATE FUNCTION backwave_enqueue_bytes(
    wire_name text, payload bytea, queue text, due_at_ms bigint DEFAULT NULL, labels jsonb DEFAULT '{}',
    unique_key text DEFAULT NULL, unique_by_payload boolean DEFAULT false, unique_states text[] DEFAULT NULL,
    unique_period_ms bigint DEFAULT NULL, traceparent text DEFAULT NULL, OUT job_id uuid, OUT created boolean)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER AS $$
#variable_conflict use_variable
DECLARE
    now_ms  bigint := bw_now_ms();
    lim     bigint := bw_payload_limit();
    ukey    text;
    ustates bigint;
    uwindow bigint;
    mask    bigint;
    s       text;
    b       bytea;
    seed    bigint;
BEGIN
    PERFORM bw_check_name('wire name', wire_name);
    PERFORM bw_check_name('queue', queue);
    IF traceparent IS NOT NULL AND traceparent !~ '^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$' THEN
        RAISE EXCEPTION 'the traceparent % is not a W3C traceparent (version-trace id-parent id-flags, lower-case hex)',
            to_json(traceparent) USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF payload IS NULL THEN
        RAISE EXCEPTION 'the payload must not be NULL' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF labels IS NULL OR jsonb_typeof(labels) <> 'object'
       OR EXISTS (SELECT 1 FROM jsonb_each(labels) l WHERE jsonb_typeof(l.value) <> 'string') THEN
        RAISE EXCEPTION 'the labels % are not a JSON object of strings', coalesce(labels::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF octet_length(payload) > lim THEN
        RAISE EXCEPTION 'backwave: a payload of % bytes is over the store''s payload_limit of % bytes',
            octet_length(payload), lim USING ERRCODE = 'program_limit_exceeded';
    END IF;
    -- The unique rule, as store/unique.rs `validate` and `columns` make it.
    IF unique_key IS NOT NULL AND coalesce(unique_by_payload, false) THEN
        RAISE EXCEPTION 'a unique rule is by key (%) or by payload, not both', to_json(unique_key)
            USING ERRCODE = 'invalid_parameter_value';
    ELSIF unique_key IS NOT NULL OR coalesce(unique_by_payload, false) THEN
        IF unique_key IS NOT NULL THEN
            PERFORM bw_check_name('unique key', unique_key);
            ukey := unique_key;
        ELSE
            ukey := wire_name || ':' || encode(sha256(payload), 'hex');
        END IF;
        ustates := 0;
        FOREACH s IN ARRAY coalesce(unique_states, ARRAY['scheduled', 'running']) LOOP
            mask := CASE s WHEN 'scheduled' THEN 1 WHEN 'running' THEN 2 WHEN 'succeeded' THEN 4
                          WHEN 'dead-lettered' THEN 8 WHEN 'quarantined' THEN 16 WHEN 'cancelled' THEN 32 END;
            IF mask IS NULL THEN
                RAISE EXCEPTION 'unique states: % is not a state (scheduled, running, succeeded, dead-lettered, quarantined, cancelled)',
                    coalesce(to_json(s)::text, 'NULL') USING ERRCODE = 'invalid_parameter_value';
            END IF;
            ustates := ustates | mask;
        END LOOP;
        IF ustates & 3 <> 3 THEN
            RAISE EXCEPTION 'unique states ''%'' leave out %: a unique job holds its key while scheduled and running (add terminal states to keep it longer)',
                array_to_string(unique_states, ','), CASE WHEN ustates & 1 = 0 THEN 'scheduled' ELSE 'running' END
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        IF unique_period_ms IS NOT NULL AND unique_period_ms < 1 THEN
            RAISE EXCEPTION 'the unique period ''%ms'' is shorter than 1ms', unique_period_ms
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        uwindow := CASE WHEN unique_period_ms IS NULL THEN 0
                        ELSE now_ms - (((now_ms % unique_period_ms) + unique_period_ms) % unique_period_ms) END;
    ELSIF unique_states IS NOT NULL OR unique_period_ms IS NOT NULL THEN
        RAISE EXCEPTION 'unique states or a unique period need unique_key or unique_by_payload'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- As store/jobs.rs `insert_jobs`: the unique index decides (ON CONFLICT DO NOTHING, which
    -- waits for a racing insert of the key), and only then is the holder read. A holder that
    -- left its states between the two statements frees the key: try again.
    FOR round IN 1..100 LOOP
        -- A time-ordered v7 id, as the library writes; the jitter seed is its random tail.
        b := uuid_send(gen_random_uuid());
        b := overlay(b PLACING substring(int8send(now_ms) FROM 3 FOR 6) FROM 1 FOR 6);
        b := set_byte(b, 6, (get_byte(b, 6) & 15) | 112);
        job_id := encode(b, 'hex')::uuid;
        seed := ('x' || encode(substring(b FROM 9 FOR 8), 'hex'))::bit(64)::bigint;
        INSERT INTO jobs (id, wire_name, queue, labels, payload, state, due_at, jitter_seed, created_at, updated_at,
                          unique_key, unique_states, unique_window, traceparent)
            VALUES (job_id, wire_name, queue, labels, payload, 'scheduled', coalesce(due_at_ms, now_ms), seed,
                    now_ms, now_ms, ukey, ustates, uwindow, traceparent)
            ON CONFLICT DO NOTHING;
        IF FOUND THEN
            INSERT INTO transitions (job_id, at, from_state, to_state, attempt)
                VALUES (job_id, now_ms, NULL, 'scheduled', 0);
            created := true;
            RETURN;
        END IF;
        IF ukey IS NULL THEN
            RAISE EXCEPTION 'job id % is already taken', job_id;
        END IF;
        SELECT h.id INTO job_id FROM jobs h
            WHERE h.unique_key = ukey AND h.unique_window = uwindow AND h.unique_key IS NOT NULL
              AND (h.unique_states & (CASE h.state WHEN 'scheduled' THEN 1 WHEN 'running' THEN 2
                   WHEN 'succeeded' THEN 4 WHEN 'dead-lettered' THEN 8 WHEN 'quarantined' THEN 16
                   WHEN 'cancelled' THEN 32 ELSE 0 END)) <> 0;
        IF FOUND THEN
            created := false;
            RETURN;
        END IF;
    END LOOP;
    RAISE EXCEPTION 'the unique key ''%'' is taken, but no job holding it was found; try again', ukey;
END
$$;

-- The form for people and other languages: the payload as JSON (`json`, not `jsonb`, so that its
-- text is stored as given and a unique-by-payload key is the library's for the same text), times
-- as timestamptz and an interval.
CREATE FUNCTION backwave_enqueue(
    wire_name text, payload json, queue text DEFAULT 'default', due_at timestamptz DEFAULT NULL,
    labels jsonb DEFAULT '{}', unique_key text DEFAULT NULL, unique_by_payload boolean DEFAULT false,
    unique_states text[] DEFAULT NULL, unique_period interval DEFAULT NULL, traceparent text DEFAULT NULL,
    OUT job_id uuid, OUT created boolean)
LANGUAGE sql VOLATILE SECURITY DEFINER AS $$
    SELECT e.job_id, e.created FROM backwave_enqueue_bytes(
        wire_name, convert_to(payload::text, 'UTF8'), queue, floor(extract(epoch FROM due_at) * 1000)::bigint,
        labels, unique_key, unique_by_payload, unique_states,
        floor(extract(epoch FROM unique_period) * 1000)::bigint, traceparent) e
$$;

DO $$
DECLARE
    f text;
    g text;
BEGIN
    FOREACH f IN ARRAY ARRAY['backwave_enqueue_bytes(text, bytea, text, bigint, jsonb, text, boolean, text[], bigint, text)',
        'backwave_enqueue(text, json, text, timestamptz, jsonb, text, boolean, text[], interval, text)']
    LOOP
        EXECUTE format('ALTER FUNCTION %s SET search_path = %I, pg_temp', f, current_schema());
        EXECUTE format('REVOKE ALL ON FUNCTION %s FROM PUBLIC', f);
        FOR g IN SELECT grantee FROM bw_enqueue_grants LOOP
            EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO %s', f, g);
        END LOOP;
    END LOOP;
END
$$;
UPDATE backwave_schema SET version = 15;
-- migration 15 end

-- Version 15 -> 16: priority within a queue (issue 40; schema.sql's migration 16 says what the
-- columns mean and how a claim reads the index). The claim reads `jobs_claim_priority` one
-- priority at a time (a UNION ALL of ten short ranges, taken in order and stopped at the batch
-- size), so it never walks future retries and never sorts. Both enqueue functions take the
-- priority as a last, optional argument (NULL: 0), their grants kept as in migration 15.
-- migration 16 begin
ALTER TABLE jobs ADD COLUMN IF NOT EXISTS priority bigint NOT NULL DEFAULT 0 CHECK (priority >= 0 AND priority <= 9);
CREATE INDEX IF NOT EXISTS jobs_claim_priority ON jobs (queue, priority, due_at, id) WHERE state = 'scheduled';
ALTER TABLE schedules ADD COLUMN IF NOT EXISTS priority bigint NOT NULL DEFAULT 0 CHECK (priority >= 0 AND priority <= 9);
-- (A new store runs every block in one transaction: migration 15's table is still there.)
DROP TABLE IF EXISTS pg_temp.bw_enqueue_grants;
CREATE TEMP TABLE bw_enqueue_grants ON COMMIT DROP AS
    SELECT a.grantee::regrole::text AS grantee
    FROM pg_proc p, aclexplode(p.proacl) a
    WHERE p.oid IN (to_regprocedure('backwave_enqueue_bytes(text, bytea, text, bigint, jsonb, text, boolean, text[], bigint, text)'),
                    to_regprocedure('backwave_enqueue(text, json, text, timestamptz, jsonb, text, boolean, text[], interval, text)'))
      AND a.privilege_type = 'EXECUTE' AND a.grantee <> 0 AND a.grantee <> p.proowner
    GROUP BY a.grantee;
DROP FUNCTION IF EXISTS backwave_enqueue(text, json, text, timestamptz, jsonb, text, boolean, text[], interval, text);
DROP FUNCTION IF EXISTS backwave_enqueue_bytes(text, bytea, text, bigint, jsonb, text, boolean, text[], bigint, text);

-- The payload as bytes and times as milliseconds: what the library passes (migration 15's, and the
-- job's priority: NULL or left out is 0).
CREATE FUNCTION backwave_enqueue_bytes(
    wire_name text, payload bytea, queue text, due_at_ms bigint DEFAULT NULL, labels jsonb DEFAULT '{}',
    unique_key text DEFAULT NULL, unique_by_payload boolean DEFAULT false, unique_states text[] DEFAULT NULL,
    unique_period_ms bigint DEFAULT NULL, traceparent text DEFAULT NULL, priority bigint DEFAULT NULL,
    OUT job_id uuid, OUT created boolean)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER AS $$
#variable_conflict use_variable
DECLARE
    now_ms  bigint := bw_now_ms();
    lim     bigint := bw_payload_limit();
    ukey    text;
    ustates bigint;
    uwindow bigint;
    mask    bigint;
    s       text;
    b       bytea;
    seed    bigint;
BEGIN
    PERFORM bw_check_name('wire name', wire_name);
    PERFORM bw_check_name('queue', queue);
    IF traceparent IS NOT NULL AND traceparent !~ '^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$' THEN
        RAISE EXCEPTION 'the traceparent % is not a W3C traceparent (version-trace id-parent id-flags, lower-case hex)',
            to_json(traceparent) USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF priority IS NOT NULL AND (priority < 0 OR priority > 9) THEN
        RAISE EXCEPTION 'the priority % is out of range: a priority is 0 (claimed first) to 9 (claimed last)', priority
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF payload IS NULL THEN
        RAISE EXCEPTION 'the payload must not be NULL' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF labels IS NULL OR jsonb_typeof(labels) <> 'object'
       OR EXISTS (SELECT 1 FROM jsonb_each(labels) l WHERE jsonb_typeof(l.value) <> 'string') THEN
        RAISE EXCEPTION 'the labels % are not a JSON object of strings', coalesce(labels::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF octet_length(payload) > lim THEN
        RAISE EXCEPTION 'backwave: a payload of % bytes is over the store''s payload_limit of % bytes',
            octet_length(payload), lim USING ERRCODE = 'program_limit_exceeded';
    END IF;
    -- The unique rule, as store/unique.rs `validate` and `columns` make it.
    IF unique_key IS NOT NULL AND coalesce(unique_by_payload, false) THEN
        RAISE EXCEPTION 'a unique rule is by key (%) or by payload, not both', to_json(unique_key)
            USING ERRCODE = 'invalid_parameter_value';
    ELSIF unique_key IS NOT NULL OR coalesce(unique_by_payload, false) THEN
        IF unique_key IS NOT NULL THEN
            PERFORM bw_check_name('unique key', unique_key);
            ukey := unique_key;
        ELSE
            ukey := wire_name || ':' || encode(sha256(payload), 'hex');
        END IF;
        ustates := 0;
        FOREACH s IN ARRAY coalesce(unique_states, ARRAY['scheduled', 'running']) LOOP
            mask := CASE s WHEN 'scheduled' THEN 1 WHEN 'running' THEN 2 WHEN 'succeeded' THEN 4
                          WHEN 'dead-lettered' THEN 8 WHEN 'quarantined' THEN 16 WHEN 'cancelled' THEN 32 END;
            IF mask IS NULL THEN
                RAISE EXCEPTION 'unique states: % is not a state (scheduled, running, succeeded, dead-lettered, quarantined, cancelled)',
                    coalesce(to_json(s)::text, 'NULL') USING ERRCODE = 'invalid_parameter_value';
            END IF;
            ustates := ustates | mask;
        END LOOP;
        IF ustates & 3 <> 3 THEN
            RAISE EXCEPTION 'unique states ''%'' leave out %: a unique job holds its key while scheduled and running (add terminal states to keep it longer)',
                array_to_string(unique_states, ','), CASE WHEN ustates & 1 = 0 THEN 'scheduled' ELSE 'running' END
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        IF unique_period_ms IS NOT NULL AND unique_period_ms < 1 THEN
            RAISE EXCEPTION 'the unique period ''%ms'' is shorter than 1ms', unique_period_ms
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        uwindow := CASE WHEN unique_period_ms IS NULL THEN 0
                        ELSE now_ms - (((now_ms % unique_period_ms) + unique_period_ms) % unique_period_ms) END;
    ELSIF unique_states IS NOT NULL OR unique_period_ms IS NOT NULL THEN
        RAISE EXCEPTION 'unique states or a unique period need unique_key or unique_by_payload'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- As store/jobs.rs `insert_jobs`: the unique index decides (ON CONFLICT DO NOTHING, which
    -- waits for a racing insert of the key), and only then is the holder read. A holder that
    -- left its states between the two statements frees the key: try again.
    FOR round IN 1..100 LOOP
        -- A time-ordered v7 id, as the library writes; the jitter seed is its random tail.
        b := uuid_send(gen_random_uuid());
        b := overlay(b PLACING substring(int8send(now_ms) FROM 3 FOR 6) FROM 1 FOR 6);
        b := set_byte(b, 6, (get_byte(b, 6) & 15) | 112);
        job_id := encode(b, 'hex')::uuid;
        seed := ('x' || encode(substring(b FROM 9 FOR 8), 'hex'))::bit(64)::bigint;
        INSERT INTO jobs (id, wire_name, queue, labels, payload, state, due_at, jitter_seed, created_at, updated_at,
                          unique_key, unique_states, unique_window, traceparent, priority)
            VALUES (job_id, wire_name, queue, labels, payload, 'scheduled', coalesce(due_at_ms, now_ms), seed,
                    now_ms, now_ms, ukey, ustates, uwindow, traceparent, coalesce(priority, 0))
            ON CONFLICT DO NOTHING;
        IF FOUND THEN
            INSERT INTO transitions (job_id, at, from_state, to_state, attempt)
                VALUES (job_id, now_ms, NULL, 'scheduled', 0);
            created := true;
            RETURN;
        END IF;
        IF ukey IS NULL THEN
            RAISE EXCEPTION 'job id % is already taken', job_id;
        END IF;
        SELECT h.id INTO job_id FROM jobs h
            WHERE h.unique_key = ukey AND h.unique_window = uwindow AND h.unique_key IS NOT NULL
              AND (h.unique_states & (CASE h.state WHEN 'scheduled' THEN 1 WHEN 'running' THEN 2
                   WHEN 'succeeded' THEN 4 WHEN 'dead-lettered' THEN 8 WHEN 'quarantined' THEN 16
                   WHEN 'cancelled' THEN 32 ELSE 0 END)) <> 0;
        IF FOUND THEN
            created := false;
            RETURN;
        END IF;
    END LOOP;
    RAISE EXCEPTION 'the unique key ''%'' is taken, but no job holding it was found; try again', ukey;
END
$$;

-- The form for people and other languages: the payload as JSON (`json`, not `jsonb`, so that its
-- text is stored as given and a unique-by-payload key is the library's for the same text), times
-- as timestamptz and an interval.
CREATE FUNCTION backwave_enqueue(
    wire_name text, payload json, queue text DEFAULT 'default', due_at timestamptz DEFAULT NULL,
    labels jsonb DEFAULT '{}', unique_key text DEFAULT NULL, unique_by_payload boolean DEFAULT false,
    unique_states text[] DEFAULT NULL, unique_period interval DEFAULT NULL, traceparent text DEFAULT NULL,
    priority bigint DEFAULT NULL, OUT job_id uuid, OUT created boolean)
LANGUAGE sql VOLATILE SECURITY DEFINER AS $$
    SELECT e.job_id, e.created FROM backwave_enqueue_bytes(
        wire_name, convert_to(payload::text, 'UTF8'), queue, floor(extract(epoch FROM due_at) * 1000)::bigint,
        labels, unique_key, unique_by_payload, unique_states,
        floor(extract(epoch FROM unique_period) * 1000)::bigint, traceparent, priority) e
$$;

DO $$
DECLARE
    f text;
    g text;
BEGIN
    FOREACH f IN ARRAY ARRAY['backwave_enqueue_bytes(text, bytea, text, bigint, jsonb, text, boolean, text[], bigint, text, bigint)',
        'backwave_enqueue(text, json, text, timestamptz, jsonb, text, boolean, text[], interval, text, bigint)']
    LOOP
        EXECUTE format('ALTER FUNCTION %s SET search_path = %I, pg_temp', f, current_schema());
        EXECUTE format('REVOKE ALL ON FUNCTION %s FROM PUBLIC', f);
        FOR g IN SELECT grantee FROM bw_enqueue_grants LOOP
            EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO %s', f, g);
        END LOOP;
    END LOOP;
END
$$;
UPDATE backwave_schema SET version = 16;
-- migration 16 end

-- Version 16 -> 17: job output and progress (issue 42), as in schema.sql: `output` written with
-- the success, `progress` and `progress_message` by the heartbeat that renews the attempt's
-- lease (in the heartbeat's one statement), cleared by the next claim.
-- migration 17 begin
ALTER TABLE jobs ADD COLUMN IF NOT EXISTS output bytea;
ALTER TABLE jobs ADD COLUMN IF NOT EXISTS progress double precision
    CHECK (progress IS NULL OR (progress >= 0 AND progress <= 1));
ALTER TABLE jobs ADD COLUMN IF NOT EXISTS progress_message text
    CHECK (progress_message IS NULL OR char_length(progress_message) <= 200);
UPDATE backwave_schema SET version = 17;
-- migration 17 end

-- Version 17 -> 18: workflows (issue 42), as schema.sql's migration 18: the `waiting` state, the
-- `workflows` and `job_edges` tables, `jobs.workflow_id` and the release trigger. Here the
-- trigger is per statement (a batch of completions is one statement), and a child is released
-- under its row lock: two parents of one child completing at the same instant in two
-- transactions both meet their own edge, then queue on the child's lock; the second one's next
-- statement sees the first one's committed edge, so exactly one of them releases the child.
-- migration 18 begin
ALTER TABLE jobs DROP CONSTRAINT IF EXISTS jobs_state_check;
ALTER TABLE jobs ADD CONSTRAINT jobs_state_check
    CHECK (state IN ('scheduled', 'running', 'succeeded', 'dead-lettered', 'quarantined', 'cancelled', 'waiting'));
ALTER TABLE transitions DROP CONSTRAINT IF EXISTS transitions_from_state_check;
ALTER TABLE transitions ADD CONSTRAINT transitions_from_state_check
    CHECK (from_state IS NULL OR from_state IN ('scheduled', 'running', 'succeeded', 'dead-lettered',
                                                'quarantined', 'cancelled', 'waiting'));
ALTER TABLE transitions DROP CONSTRAINT IF EXISTS transitions_to_state_check;
ALTER TABLE transitions ADD CONSTRAINT transitions_to_state_check
    CHECK (to_state IN ('scheduled', 'running', 'succeeded', 'dead-lettered', 'quarantined', 'cancelled', 'waiting'));

CREATE TABLE workflows (
    id         uuid   PRIMARY KEY,
    name       text   NOT NULL CHECK (length(name) > 0),
    jobs       bigint NOT NULL CHECK (jobs >= 1),
    created_at bigint NOT NULL
);

ALTER TABLE jobs ADD COLUMN workflow_id uuid;
CREATE INDEX jobs_workflow ON jobs (workflow_id, created_at) WHERE workflow_id IS NOT NULL;
CREATE INDEX jobs_waiting ON jobs (workflow_id) WHERE state = 'waiting';

CREATE TABLE job_edges (
    child  uuid    NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    parent uuid    NOT NULL CHECK (parent <> child),
    needs  text    NOT NULL DEFAULT 'succeeded' CHECK (needs IN ('succeeded', 'finished')),
    met    boolean NOT NULL DEFAULT false,
    PRIMARY KEY (child, parent)
);
CREATE INDEX job_edges_parent ON job_edges (parent, child);
CREATE INDEX job_edges_unmet ON job_edges (child) WHERE NOT met;

-- SECURITY DEFINER: a worker role completes parents without rights on `job_edges`; the release it
-- causes is the trigger's, not the role's. A worker still cannot release a child by itself
-- without meeting its edges: `jobs_operator_update` below lets `waiting` become `scheduled`
-- without `operate`, and nothing else.
CREATE FUNCTION bw_release_children() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER AS $$
DECLARE
    kids uuid[];
    at_ms bigint;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM new_rows n WHERE n.workflow_id IS NOT NULL AND n.finished_at IS NOT NULL) THEN
        RETURN NULL;
    END IF;
    -- Every finished workflow job of the statement (not joined to old_rows: the transition
    -- tables have no statistics, and a nested loop over the two was quadratic in the batch); an
    -- edge already met is passed over, so a finished row updated again changes nothing.
    WITH ended AS (
        SELECT n.id, n.state, n.updated_at FROM new_rows n
        WHERE n.workflow_id IS NOT NULL AND n.finished_at IS NOT NULL
    ), met AS (
        UPDATE job_edges e SET met = true FROM ended
        WHERE e.parent = ended.id AND NOT e.met AND (ended.state = 'succeeded' OR e.needs = 'finished')
        RETURNING e.child, ended.updated_at
    )
    SELECT array_agg(DISTINCT child ORDER BY child), max(updated_at) INTO kids, at_ms FROM met;
    IF kids IS NULL THEN
        RETURN NULL;
    END IF;
    -- In id order, so that completers of overlapping children never wait on each other in a circle.
    PERFORM 1 FROM jobs WHERE id = ANY (kids) AND state = 'waiting' ORDER BY id FOR UPDATE;
    WITH released AS (
        UPDATE jobs j SET state = 'scheduled', due_at = greatest(j.due_at, at_ms), updated_at = at_ms
        WHERE j.id = ANY (kids) AND j.state = 'waiting'
          AND NOT EXISTS (SELECT 1 FROM job_edges u WHERE u.child = j.id AND NOT u.met)
        RETURNING j.id, j.attempt
    )
    INSERT INTO transitions (job_id, at, from_state, to_state, attempt, reason)
        SELECT id, at_ms, 'waiting', 'scheduled', attempt, 'its parents are done' FROM released ORDER BY id;
    RETURN NULL;
END
$$;
DO $$
BEGIN
    EXECUTE format('ALTER FUNCTION bw_release_children() SET search_path = %I, pg_temp', current_schema());
END
$$;
CREATE TRIGGER jobs_release AFTER UPDATE ON jobs
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION bw_release_children();

DROP TRIGGER IF EXISTS jobs_operator_update ON jobs;
CREATE TRIGGER jobs_operator_update BEFORE UPDATE ON jobs FOR EACH ROW
    WHEN ((OLD.state NOT IN ('scheduled', 'running', 'waiting')
           OR (NEW.state = 'cancelled' AND NEW.cancel_requested_by IS NULL)
           OR (OLD.state = 'scheduled' AND NEW.state = 'scheduled')
           OR (OLD.state = 'waiting' AND NEW.state <> 'scheduled'))
          AND NOT bw_trusted())
    EXECUTE FUNCTION bw_check_write('operate');
UPDATE backwave_schema SET version = 18;
-- migration 18 end

-- Version 18 -> 19: a workflow's `on_failure`, as schema.sql's migration 19. The cancel runs in
-- `bw_cancel_dependents`, SECURITY DEFINER like the release: a worker role that dead-letters a
-- parent cancels its dependents through it, and still cannot cancel a waiting job by its own
-- UPDATE (`jobs_operator_update` lets a `waiting` job become `cancelled` only inside a function
-- the schema's owner defined, `bw_definer()`).
-- migration 19 begin
ALTER TABLE workflows ADD COLUMN on_failure text NOT NULL DEFAULT 'wait' CHECK (on_failure IN ('wait', 'cancel'));

-- Whether the statement runs inside a SECURITY DEFINER function of the schema's owner.
DO $$
BEGIN
    EXECUTE format(
        'CREATE OR REPLACE FUNCTION bw_definer() RETURNS boolean LANGUAGE sql STABLE
             AS $f$ SELECT pg_catalog.pg_has_role(current_user, %s::pg_catalog.oid, ''MEMBER'') $f$',
        (SELECT c.relowner FROM pg_class c WHERE c.oid = format('%I.backwave_schema', current_schema())::regclass));
END
$$;

-- Cancel, at `at_ms`, the waiting jobs that need one of `parents` (those of them that ended
-- Dead-Lettered, Quarantined or Cancelled: calling it on any other job does nothing) to
-- succeed, in workflows whose `on_failure` is 'cancel', and the waiting jobs that need those, and so on; each logged
-- `waiting -> cancelled` with a cause naming the parent that ended. Returns how many. Rows are
-- locked in id order, as the release locks them.
CREATE FUNCTION bw_cancel_dependents(parents uuid[], at_ms bigint) RETURNS bigint
    LANGUAGE plpgsql SECURITY DEFINER AS $$
DECLARE
    ids uuid[];
    roots uuid[];
    n bigint;
BEGIN
    WITH RECURSIVE doomed(id, root) AS (
        SELECT e.child, e.parent FROM job_edges e
            JOIN jobs p ON p.id = e.parent AND p.state IN ('dead-lettered', 'quarantined', 'cancelled')
            JOIN jobs c ON c.id = e.child AND c.state = 'waiting'
            JOIN workflows w ON w.id = c.workflow_id AND w.on_failure = 'cancel'
        WHERE e.parent = ANY (parents) AND e.needs = 'succeeded' AND NOT e.met
        UNION
        SELECT e.child, d.root FROM doomed d
            JOIN job_edges e ON e.parent = d.id AND e.needs = 'succeeded' AND NOT e.met
            JOIN jobs c ON c.id = e.child AND c.state = 'waiting'
    ), one AS (
        SELECT id, (array_agg(root ORDER BY root))[1] AS root FROM doomed GROUP BY id
    )
    SELECT array_agg(id ORDER BY id), array_agg(root ORDER BY id) INTO ids, roots FROM one;
    IF ids IS NULL THEN
        RETURN 0;
    END IF;
    PERFORM 1 FROM jobs WHERE id = ANY (ids) AND state = 'waiting' ORDER BY id FOR UPDATE;
    WITH o AS (
        SELECT d.id, format('a job it needs, %s, ended %s; its workflow cancels what depends on a failed job',
                            d.root, p.state) AS cause
        FROM unnest(ids, roots) AS d(id, root) JOIN jobs p ON p.id = d.root
    ), cancelled AS (
        UPDATE jobs j SET state = 'cancelled', terminal_cause = o.cause,
                          finished_at = at_ms, updated_at = at_ms
        FROM o WHERE j.id = o.id AND j.state = 'waiting'
        RETURNING j.id, j.attempt, o.cause
    ), logged AS (
        INSERT INTO transitions (job_id, at, from_state, to_state, attempt, reason)
            SELECT id, at_ms, 'waiting', 'cancelled', attempt, cause FROM cancelled ORDER BY id
            RETURNING 1
    )
    SELECT count(*) INTO n FROM logged;
    RETURN n;
END
$$;
DO $$
BEGIN
    EXECUTE format('ALTER FUNCTION bw_cancel_dependents(uuid[], bigint) SET search_path = %I, pg_temp', current_schema());
END
$$;

DROP TRIGGER IF EXISTS jobs_operator_update ON jobs;
CREATE TRIGGER jobs_operator_update BEFORE UPDATE ON jobs FOR EACH ROW
    WHEN ((OLD.state NOT IN ('scheduled', 'running', 'waiting')
           OR (NEW.state = 'cancelled' AND NEW.cancel_requested_by IS NULL)
           OR (OLD.state = 'scheduled' AND NEW.state = 'scheduled')
           OR (OLD.state = 'waiting' AND NEW.state <> 'scheduled'))
          AND NOT bw_trusted() AND NOT bw_definer())
    EXECUTE FUNCTION bw_check_write('operate');
UPDATE backwave_schema SET version = 19;
-- migration 19 end

-- Version 19 -> 20: schema.sql's migration 20 says why `jobs_claim` goes. Here the claim index also
-- loses its last column, `id`: among equal due times the index keeps entries in the order of
-- their rows (as SQLite keeps rowid order), and with the 16-byte uuid in every entry an enqueue
-- wrote a tenth more (50,000 jobs: 70,400 jobs/s against 80,000 without it, alternating runs of
-- `run.sh pg-bw`) while the drain took no more from it.
-- migration 20 begin
DROP INDEX IF EXISTS jobs_claim;
DROP INDEX IF EXISTS jobs_claim_priority;
CREATE INDEX jobs_claim_priority ON jobs (queue, priority, due_at) WHERE state = 'scheduled';
UPDATE backwave_schema SET version = 20;
-- migration 20 end

-- Version 20 -> 21: PostgreSQL only. `jobs_release` (migration 18) was called for every statement
-- that updates jobs, and read every row the statement changed to find a finished workflow job:
-- each claim and completion of jobs outside workflows paid a call of a SECURITY DEFINER function
-- and a scan of its rows for nothing (a 2,000-row completion: 23.0 ms against 20.3 ms before
-- workflows, the trigger 0.45 ms of it; EXPLAIN ANALYZE). Now a row trigger on `finished_at`,
-- whose `WHEN` the server checks without calling anything, marks the transaction when a workflow
-- job ends (the setting `backwave.release`, local to the transaction, so a statement that fails
-- takes its mark with it), and `jobs_release`'s own `WHEN` queues the statement's release only
-- when the mark is there. A statement's BEFORE row triggers run before its AFTER statement
-- trigger is queued, and every statement that ends a job sets `finished_at` (as SQLite's
-- `jobs_release` relies on since migration 20). The release clears the mark and is otherwise
-- migration 18's: it still finds the statement's finished workflow jobs itself, so a second
-- release queued by the same mark (two updates of jobs in one statement) does no harm.
-- migration 21 begin
CREATE OR REPLACE FUNCTION bw_release_children() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER AS $$
DECLARE
    kids uuid[];
    at_ms bigint;
BEGIN
    -- The mark that queued this call is spent (see `jobs_release` below).
    PERFORM pg_catalog.set_config('backwave.release', '', true);
    -- Every finished workflow job of the statement (not joined to old_rows: the transition
    -- tables have no statistics, and a nested loop over the two was quadratic in the batch); an
    -- edge already met is passed over, so a finished row updated again changes nothing.
    WITH ended AS (
        SELECT n.id, n.state, n.updated_at FROM new_rows n
        WHERE n.workflow_id IS NOT NULL AND n.finished_at IS NOT NULL
    ), met AS (
        UPDATE job_edges e SET met = true FROM ended
        WHERE e.parent = ended.id AND NOT e.met AND (ended.state = 'succeeded' OR e.needs = 'finished')
        RETURNING e.child, ended.updated_at
    )
    SELECT array_agg(DISTINCT child ORDER BY child), max(updated_at) INTO kids, at_ms FROM met;
    IF kids IS NULL THEN
        RETURN NULL;
    END IF;
    -- In id order, so that completers of overlapping children never wait on each other in a circle.
    PERFORM 1 FROM jobs WHERE id = ANY (kids) AND state = 'waiting' ORDER BY id FOR UPDATE;
    WITH released AS (
        UPDATE jobs j SET state = 'scheduled', due_at = greatest(j.due_at, at_ms), updated_at = at_ms
        WHERE j.id = ANY (kids) AND j.state = 'waiting'
          AND NOT EXISTS (SELECT 1 FROM job_edges u WHERE u.child = j.id AND NOT u.met)
        RETURNING j.id, j.attempt
    )
    INSERT INTO transitions (job_id, at, from_state, to_state, attempt, reason)
        SELECT id, at_ms, 'waiting', 'scheduled', attempt, 'its parents are done' FROM released ORDER BY id;
    RETURN NULL;
END
$$;
DO $$
BEGIN
    EXECUTE format('ALTER FUNCTION bw_release_children() SET search_path = %I, pg_temp', current_schema());
END
$$;
CREATE OR REPLACE FUNCTION bw_mark_release() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_catalog.set_config('backwave.release', 'on', true);
    RETURN NEW;
END
$$;
DROP TRIGGER IF EXISTS jobs_release_mark ON jobs;
CREATE TRIGGER jobs_release_mark BEFORE UPDATE OF finished_at ON jobs FOR EACH ROW
    WHEN (NEW.workflow_id IS NOT NULL AND NEW.finished_at IS NOT NULL)
    EXECUTE FUNCTION bw_mark_release();
DROP TRIGGER IF EXISTS jobs_release ON jobs;
CREATE TRIGGER jobs_release AFTER UPDATE ON jobs
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT
    WHEN (pg_catalog.current_setting('backwave.release', true) = 'on')
    EXECUTE FUNCTION bw_release_children();
UPDATE backwave_schema SET version = 21;
-- migration 21 end
