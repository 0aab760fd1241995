-- :n scheduled jobs in queue 'q', all due (1 ms apart, the newest an hour less :n ms ago).
TRUNCATE transitions, jobs, job_counts, job_count_deltas;
INSERT INTO jobs (id, wire_name, queue, payload, due_at, created_at, updated_at)
SELECT gen_random_uuid(), 'email.send', 'q', convert_to('{"to":"a@example.com"}', 'UTF8'),
       bw_now_ms() - 3600000 + g, bw_now_ms(), bw_now_ms()
FROM generate_series(1, :n) g;
INSERT INTO job_counts SELECT queue, state, count(*) FROM jobs GROUP BY 1, 2
    ON CONFLICT (queue, state) DO UPDATE SET n = excluded.n;
VACUUM ANALYZE jobs;
VACUUM ANALYZE transitions;
