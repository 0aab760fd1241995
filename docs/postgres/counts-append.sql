-- Variant "append": per-row triggers, but appending to job_count_deltas (one row for the old
-- (queue, state), one for the new) instead of updating a counter row: no row is shared between
-- writers, so none waits for another; fold.sql folds them like the statement variant's.
CREATE OR REPLACE FUNCTION jobs_count_append() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO job_count_deltas (queue, state, d) VALUES (NEW.queue, NEW.state, 1);
    ELSIF TG_OP = 'DELETE' THEN
        INSERT INTO job_count_deltas (queue, state, d) VALUES (OLD.queue, OLD.state, -1);
    ELSE
        INSERT INTO job_count_deltas (queue, state, d) VALUES (OLD.queue, OLD.state, -1), (NEW.queue, NEW.state, 1);
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER jobs_count_insert AFTER INSERT ON jobs FOR EACH ROW EXECUTE FUNCTION jobs_count_append();
CREATE TRIGGER jobs_count_update AFTER UPDATE OF state, queue ON jobs FOR EACH ROW
    WHEN (OLD.state IS DISTINCT FROM NEW.state OR OLD.queue IS DISTINCT FROM NEW.queue)
    EXECUTE FUNCTION jobs_count_append();
CREATE TRIGGER jobs_count_delete AFTER DELETE ON jobs FOR EACH ROW EXECUTE FUNCTION jobs_count_append();
