-- Variant "stmt": statement-level triggers append one aggregated delta row per (queue, state)
-- a statement changed, to an append-only table that no writer ever updates (so writers never
-- wait for each other on a counter row). fold.sql moves the deltas into job_counts under an
-- advisory lock; a reader sums job_counts and the unfolded deltas in one snapshot.
-- PostgreSQL allows transition tables only on single-event triggers without a column list,
-- hence three triggers and the state comparison inside the UPDATE one.
CREATE OR REPLACE FUNCTION jobs_count_ins() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO job_count_deltas (queue, state, d) SELECT queue, state, count(*) FROM new_rows GROUP BY 1, 2;
    RETURN NULL;
END $$;
CREATE OR REPLACE FUNCTION jobs_count_del() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO job_count_deltas (queue, state, d) SELECT queue, state, -count(*) FROM old_rows GROUP BY 1, 2;
    RETURN NULL;
END $$;
CREATE OR REPLACE FUNCTION jobs_count_upd() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO job_count_deltas (queue, state, d)
    SELECT queue, state, sum(d) FROM (
        SELECT o.queue, o.state, -1 AS d FROM old_rows o JOIN new_rows n USING (id)
            WHERE o.state IS DISTINCT FROM n.state OR o.queue IS DISTINCT FROM n.queue
        UNION ALL
        SELECT n.queue, n.state, 1 FROM old_rows o JOIN new_rows n USING (id)
            WHERE o.state IS DISTINCT FROM n.state OR o.queue IS DISTINCT FROM n.queue
    ) changed GROUP BY 1, 2;
    RETURN NULL;
END $$;
CREATE TRIGGER jobs_count_insert AFTER INSERT ON jobs REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION jobs_count_ins();
CREATE TRIGGER jobs_count_update AFTER UPDATE ON jobs REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION jobs_count_upd();
CREATE TRIGGER jobs_count_delete AFTER DELETE ON jobs REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION jobs_count_del();
