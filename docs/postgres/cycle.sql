-- pgbench: one job's attempt as the engine runs it, in two transactions: claim one due job
-- (with its transition), then record the outcome behind the (worker, attempt) fence: 25 % of
-- attempts fail and go back to scheduled, due now; the rest succeed.
WITH picked AS (
    SELECT id FROM jobs
    WHERE state = 'scheduled' AND queue = 'q' AND due_at <= bw_now_ms()
    ORDER BY due_at LIMIT 1
    FOR UPDATE SKIP LOCKED
), claimed AS (
    UPDATE jobs j SET state = 'running', attempt = j.attempt + 1, lease_owner = 'bench/' || :client_id,
           lease_expires_at = bw_now_ms() + 60000, updated_at = bw_now_ms()
    FROM picked WHERE j.id = picked.id
    RETURNING j.id, j.attempt
), logged AS (
    INSERT INTO transitions (job_id, at, from_state, to_state, attempt, worker_id)
    SELECT id, bw_now_ms(), 'scheduled', 'running', attempt, 'bench/' || :client_id FROM claimed
)
SELECT id, attempt FROM claimed \gset
\set r random(1, 100)
\if :r <= 25
WITH done AS (
    UPDATE jobs SET state = 'scheduled', lease_owner = NULL, lease_expires_at = NULL,
           due_at = bw_now_ms(), updated_at = bw_now_ms()
    WHERE id = :id AND state = 'running' AND lease_owner = 'bench/' || :client_id AND attempt = :attempt
    RETURNING id, attempt
)
INSERT INTO transitions (job_id, at, from_state, to_state, attempt, worker_id, reason)
SELECT id, bw_now_ms(), 'running', 'scheduled', attempt, 'bench/' || :client_id, 'boom' FROM done;
\else
WITH done AS (
    UPDATE jobs SET state = 'succeeded', lease_owner = NULL, lease_expires_at = NULL,
           finished_at = bw_now_ms(), updated_at = bw_now_ms()
    WHERE id = :id AND state = 'running' AND lease_owner = 'bench/' || :client_id AND attempt = :attempt
    RETURNING id, attempt
)
INSERT INTO transitions (job_id, at, from_state, to_state, attempt, worker_id)
SELECT id, bw_now_ms(), 'running', 'succeeded', attempt, 'bench/' || :client_id FROM done;
\endif
