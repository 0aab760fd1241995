-- BackWave store contract, schema version 21.
--
-- This file is the contract: the `backwave` library embeds it verbatim (include_str!) and any
-- other program (another language's worker, a person with the `sqlite3` shell) may follow it to
-- read and write jobs that `bw` understands. Apply it to a new file with:
--     sqlite3 backwave.db < schema.sql
--
-- Conventions
--   * Times are INTEGER milliseconds since the Unix epoch, UTC.
--   * Job ids are UUIDs in lower-case hyphenated text (the library writes time-ordered v7 ids).
--   * States are spelled as on the command line:
--       scheduled running succeeded dead-lettered quarantined cancelled
--   * `PRAGMA user_version` is the schema version. A reader refuses a version it does not know.
--     Version 2 added the `pauses` table and the `jobs_claim_wire` index, version 3 the unique
--     job columns and the `jobs_unique` index, version 4 nothing here (PostgreSQL's roles),
--     version 5 the payload limit's triggers, version 6 the `limits` and `limit_windows` tables
--     and the quiet columns of `workers`, version 7 the `schedules` table, version 8 the
--     schedules' `unique_pending` and `skipped_ticks` columns, version 9 nothing here
--     (PostgreSQL's `backwave_enqueue`), version 10 the `jobs_failed_list` index, version 11 one
--     insert trigger for the count and the payload limit and a cheaper id CHECK, version 12
--     nothing here (PostgreSQL's log checks its job per statement), version 13 nothing here
--     (PostgreSQL's log drops its index on time), version 14 nothing here (PostgreSQL's
--     wake-up notifications), version 15 the `traceparent` column of `jobs`, version 16 the
--     `priority` column, version 17 the `output` and progress columns, version 18 workflows:
--     the `waiting` state, `workflow_id`, the `workflows` and `job_edges` tables and the
--     `jobs_release` trigger, version 19 the `on_failure` column of `workflows`, version 20
--     one claim index (`jobs_claim` dropped) and `jobs_release` on `finished_at`, version 21
--     nothing here (PostgreSQL's release trigger once per statement) (the sections marked
--     below); a writable open of
--     an older store applies each section it lacks, in order, in one transaction each.
--   * Connections should use journal_mode=WAL, synchronous=NORMAL, foreign_keys=ON and a busy
--     timeout; the library sets each and reads it back.
--   * CHECKs list states with OR rather than IN (...): SQLite builds a temporary b-tree for an
--     IN list of more than two constants each time it checks a row, and the claim / complete
--     path checks several per job.

PRAGMA user_version = 21;

CREATE TABLE jobs (
    id                TEXT    PRIMARY KEY NOT NULL
                              CHECK (length(id) = 36 AND id GLOB '????????-????-????-????-????????????'
                                     AND NOT id GLOB '*[^0-9a-f-]*'),
    wire_name         TEXT    NOT NULL CHECK (length(wire_name) > 0),
    queue             TEXT    NOT NULL CHECK (length(queue) > 0),
    -- A JSON object of string labels, e.g. {"tenant":"acme"}.
    labels            TEXT    NOT NULL DEFAULT '{}'
                              CHECK (json_valid(labels) AND json_type(labels) = 'object'),
    -- The handler's input, normally UTF-8 JSON. Stored as given: a payload that no longer
    -- decodes is quarantined on claim, never rewritten.
    payload           BLOB    NOT NULL DEFAULT X'',
    state             TEXT    NOT NULL DEFAULT 'scheduled'
                              CHECK (state = 'scheduled' OR state = 'running' OR state = 'succeeded'
                                     OR state = 'dead-lettered' OR state = 'quarantined'
                                     OR state = 'cancelled'),
    -- 1-based number of the current or last attempt; it rises when a worker claims the job.
    -- 0 means never claimed since enqueue or the last requeue.
    attempt           INTEGER NOT NULL DEFAULT 0 CHECK (attempt >= 0),
    -- Total attempts allowed, first included: the claiming worker group's retry policy,
    -- written at claim. NULL until the first claim.
    max_attempts      INTEGER CHECK (max_attempts IS NULL OR max_attempts >= 1),
    -- When a scheduled job may next be claimed.
    due_at            INTEGER NOT NULL,
    -- The worker holding the lease of a running job, and when that lease lapses.
    lease_owner       TEXT,
    lease_expires_at  INTEGER,
    -- The worker group of the last claim.
    worker_group      TEXT,
    -- The retry delays, written at claim: a JSON array of milliseconds whose element n-1 is the
    -- wait after failed attempt n (max_attempts - 1 elements). Whoever notices a lapsed lease
    -- schedules the retry from this table without running the worker's code. A running job
    -- without one (claimed by a program that wrote none) retries on the default policy:
    -- 10 attempts, 2^n s capped at 300 s.
    delay_table       TEXT    CHECK (delay_table IS NULL OR json_valid(delay_table)),
    -- Seed of the jitter drawn into delay_table, so a rewritten table is the same table.
    -- 0 (what a program that leaves it out writes) means: derive it from the id.
    jitter_seed       INTEGER NOT NULL DEFAULT 0,
    -- The operator who asked this running job to stop; NULL when nobody did.
    cancel_requested_by TEXT,
    -- Terminal jobs: why it ended (last failure message, lease expired, routing failure), and
    -- the same text normalised (digits, ids, hex and quoted values masked) for grouping.
    terminal_cause    TEXT,
    cause_fingerprint TEXT,
    quarantine_reason TEXT    CHECK (quarantine_reason IS NULL
                                     OR quarantine_reason IN ('no-handler', 'undecodable-payload')),
    created_at        INTEGER NOT NULL,
    updated_at        INTEGER NOT NULL,
    finished_at       INTEGER,
    CHECK ((state = 'running') = (lease_owner IS NOT NULL AND lease_expires_at IS NOT NULL)),
    CHECK ((state = 'succeeded' OR state = 'dead-lettered' OR state = 'quarantined' OR state = 'cancelled')
           = (finished_at IS NOT NULL)),
    CHECK ((state = 'quarantined') = (quarantine_reason IS NOT NULL))
);

-- Claiming: the next due job of a queue. Future-due jobs sort after the due ones, so a claim
-- stops at the first row whatever the backlog of retries waiting for later.
CREATE INDEX jobs_claim ON jobs (queue, due_at) WHERE state = 'scheduled';
-- Reaping lapsed leases.
CREATE INDEX jobs_lease ON jobs (lease_expires_at) WHERE state = 'running';
-- Terminal jobs by state, newest first, and the retention sweep.
CREATE INDEX jobs_finished ON jobs (state, finished_at) WHERE finished_at IS NOT NULL;
-- The top dead-letter causes, per wire name.
CREATE INDEX jobs_dead_causes ON jobs (wire_name, cause_fingerprint, finished_at)
    WHERE state = 'dead-lettered';
-- Quarantined jobs grouped by wire name and reason.
CREATE INDEX jobs_quarantine ON jobs (wire_name, quarantine_reason, finished_at) WHERE state = 'quarantined';
-- Scheduled and running jobs listed by time (few rows compared to the terminal ones).
CREATE INDEX jobs_active ON jobs (state, due_at) WHERE state IN ('scheduled', 'running');

-- The transition log: one entry per state change of every job, in commit order.
CREATE TABLE transitions (
    seq            INTEGER PRIMARY KEY AUTOINCREMENT,
    job_id         TEXT    NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    at             INTEGER NOT NULL,
    -- NULL for the entry that created the job.
    from_state     TEXT    CHECK (from_state IS NULL
                                  OR from_state = 'scheduled' OR from_state = 'running'
                                  OR from_state = 'succeeded' OR from_state = 'dead-lettered'
                                  OR from_state = 'quarantined' OR from_state = 'cancelled'),
    to_state       TEXT    NOT NULL
                           CHECK (to_state = 'scheduled' OR to_state = 'running'
                                  OR to_state = 'succeeded' OR to_state = 'dead-lettered'
                                  OR to_state = 'quarantined' OR to_state = 'cancelled'),
    attempt        INTEGER NOT NULL CHECK (attempt >= 0),
    worker_id      TEXT,
    -- The operator for operator actions (requeue, cancel), else NULL.
    actor          TEXT,
    reason         TEXT,
    -- Failure detail of a failed attempt: a JSON object
    -- {"type": ..., "message": ..., "chain": [...], "backtrace": ...}. Diagnostic only: the
    -- engine never reads it. NULL when there was no failure or it was not captured.
    failure_detail TEXT    CHECK (failure_detail IS NULL OR json_valid(failure_detail)),
    -- NULL: no failure on this entry; 'captured'; or 'not-captured' (switched off).
    detail_status  TEXT    CHECK (detail_status IS NULL
                                  OR detail_status IN ('captured', 'not-captured'))
);

CREATE INDEX transitions_job ON transitions (job_id, seq);

-- Live worker registry: each worker group of each process registers, heartbeats and removes
-- itself on clean shutdown. A row whose heartbeat is old belongs to a dead process.
CREATE TABLE workers (
    -- Readable in every log line: the library writes `host/pid/group#xxxx` (a random tail
    -- tells a restarted process that reused a pid from the one before).
    id                TEXT    PRIMARY KEY NOT NULL CHECK (length(id) > 0),
    worker_group      TEXT    NOT NULL,
    host              TEXT    NOT NULL,
    pid               INTEGER NOT NULL,
    -- JSON arrays of strings.
    wire_names        TEXT    NOT NULL DEFAULT '[]' CHECK (json_valid(wire_names)),
    queues            TEXT    NOT NULL DEFAULT '[]' CHECK (json_valid(queues)),
    started_at        INTEGER NOT NULL,
    last_heartbeat_at INTEGER NOT NULL,
    -- How long after its last heartbeat the worker counts as gone.
    stale_after_ms    INTEGER NOT NULL DEFAULT 30000
);

-- Counts of jobs per queue and state, kept exact by the triggers below so that dashboards never
-- count millions of rows. Writers need do nothing: the triggers hold for every program.
-- (Migration 11 folds `jobs_count_insert` into `jobs_insert`, with the payload limit.)
CREATE TABLE job_counts (
    queue TEXT    NOT NULL,
    state TEXT    NOT NULL,
    n     INTEGER NOT NULL,
    PRIMARY KEY (queue, state)
) WITHOUT ROWID;

CREATE TRIGGER jobs_count_insert AFTER INSERT ON jobs BEGIN
    INSERT INTO job_counts (queue, state, n) VALUES (NEW.queue, NEW.state, 1)
        ON CONFLICT (queue, state) DO UPDATE SET n = n + 1;
END;

CREATE TRIGGER jobs_count_update AFTER UPDATE OF state, queue ON jobs
    WHEN OLD.state IS NOT NEW.state OR OLD.queue IS NOT NEW.queue BEGIN
    UPDATE job_counts SET n = n - 1 WHERE queue = OLD.queue AND state = OLD.state;
    INSERT INTO job_counts (queue, state, n) VALUES (NEW.queue, NEW.state, 1)
        ON CONFLICT (queue, state) DO UPDATE SET n = n + 1;
END;

CREATE TRIGGER jobs_count_delete AFTER DELETE ON jobs BEGIN
    UPDATE job_counts SET n = n - 1 WHERE queue = OLD.queue AND state = OLD.state;
END;

-- Store-wide settings. Known keys:
--   failure_detail  'on' | 'off'   capture failure detail at all (default on)
--   retention       humantime       how long terminal jobs are kept (default 14d)
--   payload_limit   bytes           the largest payload a job may hold (default 1048576, 1 MiB):
--                                   the triggers of migration 3 below refuse larger ones
--   output_limit    bytes           the largest output a handler may record (default 32768,
--                                   32 KiB): the library fails an attempt whose output is larger
--   store_kind      'demo'          set by `bw demo` on the stores it creates
CREATE TABLE settings (
    key   TEXT PRIMARY KEY NOT NULL,
    value TEXT NOT NULL
) WITHOUT ROWID;

-- Operator permissions: 'view-failure-detail', 'operate', 'admin' (admin implies the others).
CREATE TABLE grants (
    actor      TEXT NOT NULL,
    permission TEXT NOT NULL CHECK (permission IN ('view-failure-detail', 'operate', 'admin')),
    granted_by TEXT NOT NULL,
    granted_at INTEGER NOT NULL,
    PRIMARY KEY (actor, permission)
) WITHOUT ROWID;

-- Operator actions that are not state changes: grants, revokes, settings, reveals of failure
-- detail, purges, pauses and resumes, run-now (a new due time is not a state change), and
-- payload edits (the old payload is kept here, in `detail`).
CREATE TABLE audit (
    seq    INTEGER PRIMARY KEY AUTOINCREMENT,
    at     INTEGER NOT NULL,
    actor  TEXT    NOT NULL,
    action TEXT    NOT NULL,
    job_id TEXT,
    detail TEXT
);

-- Version 1 -> 2: a writable open of a version-1 store runs exactly the statements between the
-- two migration markers below, in one transaction.
-- migration 2 begin

-- Paused queues and wire names: no worker claims a Scheduled job of a paused queue, or one with a
-- paused wire name. Running jobs finish normally and enqueues still land. A pause with an `until`
-- lapses by itself at that time (the row stays until resumed or paused again: claims ignore it).
-- A program that claims jobs with its own SQL honours pauses by skipping, at claim time, the
-- queues and wire names listed here with `until IS NULL OR until > now`.
CREATE TABLE pauses (
    kind      TEXT    NOT NULL CHECK (kind = 'queue' OR kind = 'wire-name'),
    name      TEXT    NOT NULL CHECK (length(name) > 0),
    paused_by TEXT    NOT NULL,
    paused_at INTEGER NOT NULL,
    -- NULL: until resumed.
    until     INTEGER,
    PRIMARY KEY (kind, name)
) WITHOUT ROWID;

-- Claiming around a paused wire name: the queue's due jobs per wire name, so that a claim steps
-- from one wire name to the next instead of over every paused job at the head of the queue.
CREATE INDEX jobs_claim_wire ON jobs (queue, wire_name, due_at) WHERE state = 'scheduled';

-- migration 2 end

-- Version 2 -> 3: unique jobs.
-- migration 3 begin

-- A job enqueued with a uniqueness rule carries it in three columns, all NULL for other jobs:
--   unique_key     the rule's key: the application's own, or `<wire name>:<sha256 of the
--                  payload, lower-case hex>` for a rule by payload.
--   unique_states  the states in which the job holds its key, a bitmask: scheduled 1, running 2,
--                  succeeded 4, dead-lettered 8, quarantined 16, cancelled 32. Always includes
--                  scheduled and running (3): a job moves between those two with no insert to
--                  check the rule.
--   unique_window  the start (ms) of the rule's period window; 0 for a rule without a period.
-- The key stays on the row when the job leaves its unique states (it shows which rule it came
-- under); the index below only counts a job while its state is in its mask. So no transition
-- needs to know about keys, and neither does another program that moves jobs by this contract.
-- A program that enqueues unique jobs inserts with `ON CONFLICT DO NOTHING` and, when nothing
-- was inserted, reads the holder's id with the index's own predicate.
ALTER TABLE jobs ADD COLUMN unique_key TEXT CHECK (unique_key IS NULL OR length(unique_key) > 0);
ALTER TABLE jobs ADD COLUMN unique_states INTEGER
    CHECK ((unique_states IS NULL) = (unique_key IS NULL) AND (unique_states IS NULL OR unique_states & 3 = 3));
ALTER TABLE jobs ADD COLUMN unique_window INTEGER CHECK ((unique_window IS NULL) = (unique_key IS NULL));

-- At most one job per (key, window) among the jobs whose state is in their own mask.
CREATE UNIQUE INDEX jobs_unique ON jobs (unique_key, unique_window)
    WHERE unique_key IS NOT NULL AND (unique_states & (CASE state
        WHEN 'scheduled' THEN 1 WHEN 'running' THEN 2 WHEN 'succeeded' THEN 4 WHEN 'dead-lettered' THEN 8
        WHEN 'quarantined' THEN 16 WHEN 'cancelled' THEN 32 ELSE 0 END)) <> 0;

-- migration 3 end

-- Version 3 -> 4: PostgreSQL only (who did what is decided by the server: its roles, triggers
-- and functions). Nothing changes on SQLite, where the file's permissions are the wall.
-- migration 4 begin
-- nothing on SQLite
-- migration 4 end

-- Version 4 -> 5: the payload limit.
-- migration 5 begin

-- The payload limit, for every program that writes jobs: a row inserted, or a payload updated,
-- larger than the `payload_limit` setting (bytes; 1048576 when unset or not a number) is refused.
-- Only an UPDATE that sets `payload` is checked, so a job stored under a higher limit still runs
-- and finishes after the limit is lowered. `bw` checks first and names both sizes.
CREATE TRIGGER jobs_payload_limit_insert BEFORE INSERT ON jobs
WHEN length(CAST(NEW.payload AS BLOB)) > coalesce(
    (SELECT CAST(value AS INTEGER) FROM settings
     WHERE key = 'payload_limit' AND value GLOB '[0-9]*' AND NOT value GLOB '*[^0-9]*'), 1048576)
BEGIN
    SELECT RAISE(ABORT, 'backwave: the payload is over the store''s payload_limit setting');
END;

CREATE TRIGGER jobs_payload_limit_update BEFORE UPDATE OF payload ON jobs
WHEN length(CAST(NEW.payload AS BLOB)) > coalesce(
    (SELECT CAST(value AS INTEGER) FROM settings
     WHERE key = 'payload_limit' AND value GLOB '[0-9]*' AND NOT value GLOB '*[^0-9]*'), 1048576)
BEGIN
    SELECT RAISE(ABORT, 'backwave: the payload is over the store''s payload_limit setting');
END;

-- migration 5 end

-- Version 5 -> 6: limits and quiet workers.
-- migration 6 begin

-- Limits on a queue or a wire name, enforced where jobs are claimed: at most `concurrency` of its
-- jobs Running under a live lease at once (a lapsed lease frees its slot), and at most `rate`
-- claimed per `rate_window_ms` (fixed windows, counted in `limit_windows`). A job over a limit
-- stays Scheduled: it spends no worker slot and no attempt. Two sources per name: the operator's
-- (`bw limit`, audited, optionally until a time) wins over the application's default (written by
-- each engine that declares one). A program that claims with its own SQL honours a limit by
-- counting as above before it claims.
CREATE TABLE limits (
    kind           TEXT    NOT NULL CHECK (kind = 'queue' OR kind = 'wire-name'),
    name           TEXT    NOT NULL CHECK (length(name) > 0),
    source         TEXT    NOT NULL CHECK (source = 'operator' OR source = 'application'),
    -- NULL: no concurrency limit.
    concurrency    INTEGER CHECK (concurrency IS NULL OR concurrency >= 1),
    -- Both NULL, or both set: at most `rate` claims per window of `rate_window_ms`.
    rate           INTEGER CHECK (rate IS NULL OR rate >= 1),
    rate_window_ms INTEGER CHECK (rate_window_ms IS NULL OR rate_window_ms >= 1),
    set_by         TEXT    NOT NULL,
    set_at         INTEGER NOT NULL,
    -- NULL: until cleared. A lapsed row is ignored by claims.
    until          INTEGER,
    PRIMARY KEY (kind, name, source),
    CHECK ((rate IS NULL) = (rate_window_ms IS NULL)),
    CHECK (concurrency IS NOT NULL OR rate IS NOT NULL)
) WITHOUT ROWID;

-- The current rate window of each rate-limited name: the window that began at `window_start`
-- (a multiple of the window length) has had `claimed` claims.
CREATE TABLE limit_windows (
    kind         TEXT    NOT NULL,
    name         TEXT    NOT NULL,
    window_start INTEGER NOT NULL,
    claimed      INTEGER NOT NULL,
    PRIMARY KEY (kind, name)
) WITHOUT ROWID;

-- A quiet worker claims nothing from its next poll on and finishes what it runs; `bw workers
-- quiet` sets these, `bw workers resume` clears them. `stopping_at`: the worker's engine began
-- to shut down.
ALTER TABLE workers ADD COLUMN quiet_at INTEGER;
ALTER TABLE workers ADD COLUMN quiet_by TEXT;
ALTER TABLE workers ADD COLUMN stopping_at INTEGER;

-- migration 6 end

-- Version 6 -> 7: recurring schedules.
-- migration 7 begin

-- Recurring schedules, declared in code by the applications that run them. Every tick of `cron`
-- (5 fields, or 6 with seconds first) read in the IANA zone `zone` enqueues one job with this
-- wire name, queue, payload and labels. Exactly one job per tick across every process: a writer
-- fires a tick by moving `last_tick` from the value it read to the tick's instant
-- (`UPDATE ... WHERE name = ? AND last_tick = ?`) in the same transaction that inserts the job;
-- a writer that changes no row inserts nothing.
CREATE TABLE schedules (
    name          TEXT    PRIMARY KEY NOT NULL CHECK (length(name) > 0),
    cron          TEXT    NOT NULL,
    zone          TEXT    NOT NULL DEFAULT 'UTC',
    wire_name     TEXT    NOT NULL CHECK (length(wire_name) > 0),
    queue         TEXT    NOT NULL CHECK (length(queue) > 0),
    payload       BLOB    NOT NULL DEFAULT X'',
    labels        TEXT    NOT NULL DEFAULT '{}' CHECK (json_valid(labels) AND json_type(labels) = 'object'),
    -- Ticks that passed while nobody fired them: 'latest' (fire the latest once), 'catch-up'
    -- (fire each, up to the latest `catch_up_max`), 'skip' (fire none that is late).
    missed        TEXT    NOT NULL DEFAULT 'latest' CHECK (missed = 'latest' OR missed = 'catch-up' OR missed = 'skip'),
    catch_up_max  INTEGER CHECK ((missed = 'catch-up') = (catch_up_max IS NOT NULL AND catch_up_max >= 1)),
    -- The cursor: the instant of the latest tick fired or dropped, or the time the schedule was
    -- first declared (so a new schedule starts with its next tick).
    last_tick     INTEGER NOT NULL,
    -- The last job this schedule made (by a tick or `bw schedule trigger`), and when.
    last_job_id   TEXT,
    last_fired_at INTEGER,
    declared_at   INTEGER NOT NULL,
    -- When the definition last changed (the change is in the audit table).
    updated_at    INTEGER NOT NULL,
    -- When a running application last declared it: a schedule nobody declared for a minute is
    -- orphaned (shown, never deleted).
    seen_at       INTEGER NOT NULL,
    -- A paused schedule drops the ticks that fall in the pause; `paused_until` NULL: until resumed.
    paused_by     TEXT,
    paused_at     INTEGER,
    paused_until  INTEGER,
    CHECK ((paused_by IS NULL) = (paused_at IS NULL))
) WITHOUT ROWID;

-- migration 7 end

-- Version 7 -> 8: a schedule whose ticks do not pile up behind a slow job.
-- migration 8 begin

-- `unique_pending` 1: a tick's job carries the unique key 'schedule:' || name (held while
-- Scheduled or Running, see `unique_key`), so a tick that comes while the previous tick's job
-- is still pending makes no job: its tick is consumed all the same (the cursor moves) and
-- counted in `skipped_ticks`, never queued behind it, never silently blocking later ticks.
ALTER TABLE schedules ADD COLUMN unique_pending INTEGER NOT NULL DEFAULT 0 CHECK (unique_pending = 0 OR unique_pending = 1);
ALTER TABLE schedules ADD COLUMN skipped_ticks INTEGER NOT NULL DEFAULT 0 CHECK (skipped_ticks >= 0);

-- migration 8 end

-- Version 8 -> 9: PostgreSQL only (`backwave_enqueue`, the SQL function that enqueues inside the
-- caller's transaction). On SQLite an application enqueues in its own transaction through the
-- library (`backwave::enqueue_in_sqlite`), on the same file.
-- migration 9 begin
-- nothing on SQLite
-- migration 9 end

-- Version 9 -> 10: the lists an operator reads in an incident without walking payloads.
-- migration 10 begin

-- Dead-Lettered and Quarantined jobs listed (`bw jobs list`, `bw top`) from the index alone. A
-- row's columns after `payload` sit behind its overflow pages, so listing 50 jobs of 1 MiB
-- payloads read 50 MiB per refresh (2.9 % of a core for an idle `bw top`). Only jobs that end
-- failed are written here, never the claim and completion of a job that succeeds.
CREATE INDEX jobs_failed_list ON jobs (state, finished_at, id, wire_name, queue, labels, attempt,
    max_attempts, due_at, lease_owner, lease_expires_at, worker_group, delay_table, cancel_requested_by,
    terminal_cause, cause_fingerprint, quarantine_reason, created_at, updated_at)
    WHERE state IN ('dead-lettered', 'quarantined');

-- migration 10 end

-- Version 10 -> 11: less work per enqueued job (issue 23), the same rules.
-- migration 11 begin

-- One trigger per inserted job instead of two. Each row trigger costs SQLite a sub-program call
-- about as dear as the count it runs, so the insert count of `jobs_count_insert` and the payload
-- limit of `jobs_payload_limit_insert` (migration 5) run in one. After the row is written, the
-- limit still refuses the whole statement (RAISE(ABORT) undoes it) with the same message, and
-- the count is never touched for a refused row.
-- (IF EXISTS: a schema that has been through this step already is left as it is.)
DROP TRIGGER IF EXISTS jobs_count_insert;
DROP TRIGGER IF EXISTS jobs_payload_limit_insert;
CREATE TRIGGER IF NOT EXISTS jobs_insert AFTER INSERT ON jobs BEGIN
    SELECT RAISE(ABORT, 'backwave: the payload is over the store''s payload_limit setting')
    WHERE length(CAST(NEW.payload AS BLOB)) > coalesce(
        (SELECT CAST(value AS INTEGER) FROM settings
         WHERE key = 'payload_limit' AND value GLOB '[0-9]*' AND NOT value GLOB '*[^0-9]*'), 1048576);
    INSERT INTO job_counts (queue, state, n) VALUES (NEW.queue, NEW.state, 1)
        ON CONFLICT (queue, state) DO UPDATE SET n = n + 1;
END;

-- The id's CHECK, the same rule checked in one pass (36 characters, a hyphen at the four
-- places, and a hex digit or a hyphen everywhere else, as before): a `*` before a `[...]` class
-- sends GLOB down its slow path (the class retried from every position), which made the id's
-- CHECK a fifth of the instructions of inserting a job; one class per position reads each
-- character once. A CHECK lives in the table's text, and one that every stored row already
-- meets is changed by editing that text (SQLite's documented way for constraints:
-- https://sqlite.org/lang_altertable.html#otheralter); RESET makes this connection read it
-- again, and the triggers dropped above move the schema cookie, so every other one does too.
PRAGMA writable_schema = ON;
UPDATE sqlite_schema SET sql = replace(sql, 'AND NOT id GLOB ''*[^0-9a-f-]*''',
    'AND id GLOB ''[0-9a-f-][0-9a-f-][0-9a-f-][0-9a-f-][0-9a-f-][0-9a-f-][0-9a-f-][0-9a-f-]-[0-9a-f-][0-9a-f-][0-9a-f-][0-9a-f-]-[0-9a-f-][0-9a-f-][0-9a-f-][0-9a-f-]-[0-9a-f-][0-9a-f-][0-9a-f-][0-9a-f-]-[0-9a-f-][0-9a-f-][0-9a-f-][0-9a-f-][0-9a-f-][0-9a-f-][0-9a-f-][0-9a-f-][0-9a-f-][0-9a-f-][0-9a-f-][0-9a-f-]''')
WHERE type = 'table' AND name = 'jobs';
PRAGMA writable_schema = RESET;

-- migration 11 end

-- Version 11 -> 12: PostgreSQL only (the log's entries checked against their jobs once per
-- statement instead of a foreign key's lookup per row; issue 23). SQLite's foreign key is an
-- index probe within the statement, and stays.
-- migration 12 begin
-- nothing on SQLite
-- migration 12 end

-- Version 12 -> 13: PostgreSQL only (its log's index on time dropped; issue 23). SQLite never
-- had one.
-- migration 13 begin
-- nothing on SQLite
-- migration 13 end

-- Version 13 -> 14: PostgreSQL only (its count trigger notifies listening workers; issue 40).
-- SQLite's workers notice another connection's commit by `PRAGMA data_version`.
-- migration 14 begin
-- nothing on SQLite
-- migration 14 end

-- Version 14 -> 15: one trace from the request to the job (issue 41). The W3C trace context
-- (https://www.w3.org/TR/trace-context/, `version-trace id-parent id-flags` in lower-case hex) of
-- the span that enqueued the job, kept with the job and not in its payload, so that the
-- worker's attempt span continues the request's trace. NULL when the enqueuing code had none.
-- Lists never read it: `jobs_failed_list` still covers them.
-- migration 15 begin
ALTER TABLE jobs ADD COLUMN traceparent TEXT
    CHECK (traceparent IS NULL OR (length(traceparent) = 55 AND traceparent GLOB
        '[0-9a-f][0-9a-f]-????????????????????????????????-????????????????-[0-9a-f][0-9a-f]'
        AND NOT substr(traceparent, 4, 49) GLOB '*[^0-9a-f-]*'));
-- migration 15 end

-- Version 15 -> 16: priority within a queue (issue 40). A job's `priority` is 0 to 9, and 0 runs
-- first: within one queue a claim takes the due jobs of priority 0, then of 1, and so on, each by
-- due time, then id (first in, first out among equals). Across queues nothing changes: a worker
-- group's dispatch policy (Strict, Weighted) picks the queue first. A steady stream of due jobs
-- of a lower number starves the higher numbers of the same queue for as long as it lasts (as
-- River's and Oban's priorities do); a queue of their own keeps them apart. A program that
-- writes jobs with its own SQL and leaves the column out gets 0, the default. A schedule's
-- `priority` is that of every job its ticks enqueue.
-- `jobs_claim_priority` is the claim's index: the claim reads it one priority at a time
-- (`priority IN (0, …, 9)` in order, ten short ranges each ending at the first job due in the
-- future), so a backlog of future retries is never walked and nothing is sorted. `jobs_claim`
-- stays for what reads a queue by due time alone (the earliest due job, the due counts).
-- Equal due times are taken in rowid order, the order the jobs were inserted (every index entry
-- ends in the rowid): the 36-byte text id in the index made every enqueue write a third more.
-- `jobs_failed_list` is made again with the new column, so that lists still never read a row.
-- migration 16 begin
ALTER TABLE jobs ADD COLUMN priority INTEGER NOT NULL DEFAULT 0 CHECK (priority >= 0 AND priority <= 9);
CREATE INDEX jobs_claim_priority ON jobs (queue, priority, due_at) WHERE state = 'scheduled';
DROP INDEX IF EXISTS jobs_failed_list;
CREATE INDEX jobs_failed_list ON jobs (state, finished_at, id, wire_name, queue, labels, attempt,
    max_attempts, due_at, lease_owner, lease_expires_at, worker_group, delay_table, cancel_requested_by,
    terminal_cause, cause_fingerprint, quarantine_reason, created_at, updated_at, priority)
    WHERE state IN ('dead-lettered', 'quarantined');
ALTER TABLE schedules ADD COLUMN priority INTEGER NOT NULL DEFAULT 0 CHECK (priority >= 0 AND priority <= 9);
-- migration 16 end

-- Version 16 -> 17: job output and progress (issue 42).
--   * `output`: what the handler of the succeeded attempt recorded (normally UTF-8 JSON), NULL
--     when it recorded nothing; written with the success in the same statement, so only a
--     Succeeded job has one (no operator action moves a Succeeded job, so an output never
--     outlives its success). The library refuses one over the `output_limit` setting by
--     failing the attempt; it goes with the row when the retention sweep deletes the job.
--   * `progress`, `progress_message`: what the running attempt last reported (a fraction from 0
--     to 1 and a short message), written by the heartbeat that renews its lease. A claim clears
--     both, so they are always the latest attempt's; after the attempt ends they stay as it
--     last reported them.
-- Lists of jobs read `progress` only for Running jobs: `jobs_failed_list` still covers the
-- failed ones.
-- migration 17 begin
ALTER TABLE jobs ADD COLUMN output BLOB;
ALTER TABLE jobs ADD COLUMN progress REAL CHECK (progress IS NULL OR (progress >= 0 AND progress <= 1));
ALTER TABLE jobs ADD COLUMN progress_message TEXT
    CHECK (progress_message IS NULL OR length(progress_message) <= 200);
-- migration 17 end

-- Version 17 -> 18: workflows (issue 42). A job of a workflow whose parents have not all done
-- what its edges need waits in the state `waiting`: out of the claim index (which covers
-- `scheduled` only), out of queue latency, never claimed. The `jobs_release` trigger below makes
-- it `scheduled` in the transaction that completes its last parent, so a release happens
-- exactly once and can never be lost between a parent's completion and its children's release,
-- whatever program completes the parent.
-- migration 18 begin
-- The state CHECKs of `jobs` and `transitions` gain `waiting` (SQLite's documented way for a
-- constraint every stored row already meets, as in migration 11); the tables created below
-- move the schema cookie, so every other connection reads the new text.
PRAGMA writable_schema = ON;
UPDATE sqlite_schema SET sql = replace(sql, 'OR state = ''cancelled''),', 'OR state = ''cancelled'' OR state = ''waiting''),')
WHERE type = 'table' AND name = 'jobs';
UPDATE sqlite_schema SET sql = replace(replace(sql,
        'OR from_state = ''quarantined'' OR from_state = ''cancelled''),',
        'OR from_state = ''quarantined'' OR from_state = ''cancelled'' OR from_state = ''waiting''),'),
        'OR to_state = ''quarantined'' OR to_state = ''cancelled''),',
        'OR to_state = ''quarantined'' OR to_state = ''cancelled'' OR to_state = ''waiting''),')
WHERE type = 'table' AND name = 'transitions';
PRAGMA writable_schema = RESET;

-- One row per workflow (or batch): a set of jobs enqueued together with edges between them.
CREATE TABLE workflows (
    id         TEXT    PRIMARY KEY NOT NULL CHECK (length(id) = 36),
    name       TEXT    NOT NULL CHECK (length(name) > 0),
    -- How many jobs it was enqueued with.
    jobs       INTEGER NOT NULL CHECK (jobs >= 1),
    created_at INTEGER NOT NULL
) WITHOUT ROWID;

-- The workflow a job belongs to; NULL for a job enqueued on its own.
ALTER TABLE jobs ADD COLUMN workflow_id TEXT;
CREATE INDEX jobs_workflow ON jobs (workflow_id, created_at) WHERE workflow_id IS NOT NULL;
-- Waiting jobs (`bw check`'s stuck workflows, `bw jobs list --state waiting`).
CREATE INDEX jobs_waiting ON jobs (workflow_id) WHERE state = 'waiting';

-- Edges of a workflow: `child` waits until `parent` has done what `needs` says: 'succeeded'
-- (a dependency) or 'finished' (any terminal state: a batch's callback). `met` is set once, by
-- the `jobs_release` trigger, when the parent gets there; an edge stays met when the parent is
-- later deleted by retention. A parent that ends Dead-Lettered, Quarantined or Cancelled leaves
-- a 'succeeded' edge unmet: its children keep waiting, and go on if an operator requeues it and
-- it succeeds.
CREATE TABLE job_edges (
    child  TEXT    NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    parent TEXT    NOT NULL CHECK (parent <> child),
    needs  TEXT    NOT NULL DEFAULT 'succeeded' CHECK (needs = 'succeeded' OR needs = 'finished'),
    met    INTEGER NOT NULL DEFAULT 0 CHECK (met = 0 OR met = 1),
    PRIMARY KEY (child, parent)
) WITHOUT ROWID;
CREATE INDEX job_edges_parent ON job_edges (parent, child);
-- A child's unmet edges: whether any is left is one probe, however many of its parents are done
-- (a fan-in of 10,000 parents checked its met edges one by one: 354 us per parent).
CREATE INDEX job_edges_unmet ON job_edges (child) WHERE met = 0;

-- A workflow job's end meets the edges that wait for it, and releases (makes `scheduled`, due no
-- earlier than the parent's end, with a log entry) each child none of whose edges is unmet any
-- more. Jobs outside workflows pass the WHEN clause and cost nothing more.
CREATE TRIGGER jobs_release AFTER UPDATE OF state ON jobs
    WHEN NEW.workflow_id IS NOT NULL AND NEW.finished_at IS NOT NULL AND OLD.state IS NOT NEW.state
BEGIN
    UPDATE job_edges SET met = 1
        WHERE parent = NEW.id AND met = 0 AND (NEW.state = 'succeeded' OR needs = 'finished');
    INSERT INTO transitions (job_id, at, from_state, to_state, attempt, reason)
        SELECT j.id, NEW.updated_at, 'waiting', 'scheduled', j.attempt, 'its parents are done'
        FROM job_edges e JOIN jobs j ON j.id = e.child
        WHERE e.parent = NEW.id AND j.state = 'waiting'
          AND NOT EXISTS (SELECT 1 FROM job_edges u WHERE u.child = j.id AND u.met = 0)
        ORDER BY j.id;
    UPDATE jobs SET state = 'scheduled', due_at = max(due_at, NEW.updated_at), updated_at = NEW.updated_at
        WHERE state = 'waiting' AND id IN (SELECT child FROM job_edges WHERE parent = NEW.id)
          AND NOT EXISTS (SELECT 1 FROM job_edges u WHERE u.child = jobs.id AND u.met = 0);
END;
-- migration 18 end

-- Version 18 -> 19: what a workflow does when a job of it ends Dead-Lettered, Quarantined or
-- Cancelled (issue 42). 'wait' (the default): the jobs that need it to succeed keep waiting, and
-- go on if an operator requeues it and it succeeds. 'cancel': the library cancels them at once,
-- and the jobs that need those, and so on down the graph, in the transaction that ends the job
-- (each logged `waiting -> cancelled`, the cause naming the job that failed). Edges that need
-- 'finished' (a batch's callback) are met by a cancelled job as by any other end.
-- migration 19 begin
ALTER TABLE workflows ADD COLUMN on_failure TEXT NOT NULL DEFAULT 'wait'
    CHECK (on_failure = 'wait' OR on_failure = 'cancel');
-- migration 19 end

-- Version 19 -> 20: what priority and workflows cost jobs outside workflows, taken back (issues
-- 40 and 42: every enqueue, claim and completion had become 6 to 9 % dearer).
--   * `jobs_claim (queue, due_at)` goes: `jobs_claim_priority (queue, priority, due_at)` answers
--     what it answered (the earliest due job of a queue is one probe per priority, a queue's due
--     jobs are ten short ranges), so an enqueue writes one index entry fewer and a claim and a
--     completion delete one fewer. One claim index, as River and Oban keep.
--   * `jobs_release` (migration 18) fires on an update of `finished_at`, not of `state`. Every
--     statement that ends a job sets `finished_at`, so the trigger still runs for each end; a
--     claim (`scheduled -> running`) and a retry (`running -> scheduled`) set neither and no
--     longer call it. A row trigger costs SQLite a sub-program call even when its `WHEN` is
--     false (the `WHEN` runs inside it), and every claim paid one for nothing. The body is
--     migration 18's.
-- migration 20 begin
DROP INDEX IF EXISTS jobs_claim;
DROP TRIGGER IF EXISTS jobs_release;
CREATE TRIGGER jobs_release AFTER UPDATE OF finished_at ON jobs
    WHEN NEW.workflow_id IS NOT NULL AND NEW.finished_at IS NOT NULL AND OLD.state IS NOT NEW.state
BEGIN
    UPDATE job_edges SET met = 1
        WHERE parent = NEW.id AND met = 0 AND (NEW.state = 'succeeded' OR needs = 'finished');
    INSERT INTO transitions (job_id, at, from_state, to_state, attempt, reason)
        SELECT j.id, NEW.updated_at, 'waiting', 'scheduled', j.attempt, 'its parents are done'
        FROM job_edges e JOIN jobs j ON j.id = e.child
        WHERE e.parent = NEW.id AND j.state = 'waiting'
          AND NOT EXISTS (SELECT 1 FROM job_edges u WHERE u.child = j.id AND u.met = 0)
        ORDER BY j.id;
    UPDATE jobs SET state = 'scheduled', due_at = max(due_at, NEW.updated_at), updated_at = NEW.updated_at
        WHERE state = 'waiting' AND id IN (SELECT child FROM job_edges WHERE parent = NEW.id)
          AND NOT EXISTS (SELECT 1 FROM job_edges u WHERE u.child = jobs.id AND u.met = 0);
END;
-- migration 20 end

-- Version 20 -> 21: PostgreSQL only (its release trigger, once per statement, marked by a row
-- trigger so that statements ending no workflow job skip it). SQLite's `jobs_release` is a row
-- trigger on `finished_at` already (migration 20).
-- migration 21 begin
-- nothing on SQLite
-- migration 21 end
