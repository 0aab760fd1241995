-- pgbench: the raw ceiling the engine bench compares with: claim up to :batch jobs (with their
-- transitions) in one transaction, then record all their successes behind the (worker, attempt)
-- fence in a second one (arrays in, one statement), with their transitions. Run with -D batch=N.
WITH picked AS (
    SELECT id FROM jobs
    WHERE state = 'scheduled' AND queue = 'q' AND due_at <= bw_now_ms() AND attempt < 4294967295
    ORDER BY due_at LIMIT :batch
    FOR UPDATE SKIP LOCKED
), claimed AS (
    UPDATE jobs j SET state = 'running', attempt = j.attempt + 1, max_attempts = 10,
           delay_table = '[2000,4000,8000,16000,32000,64000,128000,256000,300000]',
           lease_owner = 'bench/' || :client_id, lease_expires_at = bw_now_ms() + 60000,
           worker_group = 'g', updated_at = bw_now_ms()
    FROM picked WHERE j.id = picked.id
    RETURNING j.*
), logged AS (
    INSERT INTO transitions (job_id, at, from_state, to_state, attempt, worker_id)
    SELECT id, updated_at, 'scheduled', 'running', attempt, lease_owner FROM claimed
)
SELECT coalesce(array_agg(id), '{}') AS ids, coalesce(array_agg(attempt), '{}') AS attempts FROM claimed \gset
WITH done AS (
    UPDATE jobs SET state = 'succeeded', lease_owner = NULL, lease_expires_at = NULL,
           finished_at = bw_now_ms(), updated_at = bw_now_ms()
    FROM unnest(:ids::uuid[], :attempts::bigint[]) AS c(id, attempt)
    WHERE jobs.id = c.id AND jobs.state = 'running' AND jobs.lease_owner = 'bench/' || :client_id
      AND jobs.attempt = c.attempt
    RETURNING jobs.id, jobs.attempt
)
INSERT INTO transitions (job_id, at, from_state, to_state, attempt, worker_id)
SELECT id, bw_now_ms(), 'running', 'succeeded', attempt, 'bench/' || :client_id FROM done;
