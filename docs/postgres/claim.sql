-- pgbench: one claim of up to :batch due jobs of queue 'q', as one statement and one round trip:
-- lock the due rows that no other claim holds (SKIP LOCKED), move them to running under a lease,
-- append one transition each, and return the claimed rows. Run with -D batch=N -D log=0|1.
\if :log
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
SELECT * FROM claimed;
\else
WITH picked AS (
    SELECT id FROM jobs
    WHERE state = 'scheduled' AND queue = 'q' AND due_at <= bw_now_ms() AND attempt < 4294967295
    ORDER BY due_at LIMIT :batch
    FOR UPDATE SKIP LOCKED
)
UPDATE jobs j SET state = 'running', attempt = j.attempt + 1, max_attempts = 10,
       delay_table = '[2000,4000,8000,16000,32000,64000,128000,256000,300000]',
       lease_owner = 'bench/' || :client_id, lease_expires_at = bw_now_ms() + 60000,
       worker_group = 'g', updated_at = bw_now_ms()
FROM picked WHERE j.id = picked.id
RETURNING j.*;
\endif
