-- Fold the appended deltas into job_counts. One folder at a time (a transaction-scoped advisory
-- lock; a second folder skips). The DELETE sees only deltas committed before it started; later
-- ones stay for the next fold, so nothing is counted twice or lost.
BEGIN;
SELECT pg_try_advisory_xact_lock(7406) AS got \gset
\if :got
WITH gone AS (DELETE FROM job_count_deltas RETURNING queue, state, d)
INSERT INTO job_counts (queue, state, n)
SELECT queue, state, sum(d) FROM gone GROUP BY 1, 2
ON CONFLICT (queue, state) DO UPDATE SET n = job_counts.n + excluded.n;
\endif
COMMIT;
