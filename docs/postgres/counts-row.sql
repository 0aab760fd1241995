-- Variant "row": the SQLite triggers ported as they are. Every job row that changes state
-- moves one from (queue, old state) to (queue, new state) in job_counts, row by row.
CREATE OR REPLACE FUNCTION jobs_count_row() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP IN ('UPDATE', 'DELETE') THEN
        UPDATE job_counts SET n = n - 1 WHERE queue = OLD.queue AND state = OLD.state;
    END IF;
    IF TG_OP IN ('INSERT', 'UPDATE') THEN
        INSERT INTO job_counts (queue, state, n) VALUES (NEW.queue, NEW.state, 1)
            ON CONFLICT (queue, state) DO UPDATE SET n = job_counts.n + 1;
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER jobs_count_insert AFTER INSERT ON jobs FOR EACH ROW EXECUTE FUNCTION jobs_count_row();
CREATE TRIGGER jobs_count_update AFTER UPDATE OF state, queue ON jobs FOR EACH ROW
    WHEN (OLD.state IS DISTINCT FROM NEW.state OR OLD.queue IS DISTINCT FROM NEW.queue)
    EXECUTE FUNCTION jobs_count_row();
CREATE TRIGGER jobs_count_delete AFTER DELETE ON jobs FOR EACH ROW EXECUTE FUNCTION jobs_count_row();
