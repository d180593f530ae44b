-- 0003: the job state machine, enforced by the database for everyone who writes to `jobs`,
-- including a hand-typed UPDATE in psql.
--
-- Legal transitions (the table job_state_transitions below is the one place they live):
--
--   queued   -> running    a worker claimed it (attempt + 1, lease set)
--   queued   -> cancelled  cancelled before any worker took it
--   queued   -> failed     refused without a claim (e.g. validation)
--   running  -> succeeded  results stored in the same transaction
--   running  -> failed     non-retryable error, or retryable with no attempts left
--   running  -> retrying   retryable error; next_attempt_at says when
--   running  -> queued     lease expired (worker lost); the reconciler requeues it
--   running  -> cancelled  cancelled while converting; the worker's late finish writes nothing
--   retrying -> running    the retry was claimed (attempt + 1, lease set)
--   retrying -> queued     sent back to the queue (reconciler, operator)
--   retrying -> cancelled
--   retrying -> failed
--
-- succeeded, failed and cancelled are terminal: a row in one of them never changes again (to
-- run a document again, submit a new job). Staying in a non-terminal state is not a transition
-- (stage, lease renewal, source facts). The attempt number may only change on entering
-- `running`, and then by exactly one: it is the fencing token of every worker write.
--
-- Violations raise check_violation (SQLSTATE 23514), so psycopg raises CheckViolation.

CREATE TABLE job_state_transitions (
    from_state text NOT NULL,
    to_state   text NOT NULL,
    PRIMARY KEY (from_state, to_state)
);

INSERT INTO job_state_transitions (from_state, to_state) VALUES
    ('queued', 'running'), ('queued', 'cancelled'), ('queued', 'failed'),
    ('running', 'succeeded'), ('running', 'failed'), ('running', 'retrying'),
    ('running', 'queued'), ('running', 'cancelled'),
    ('retrying', 'running'), ('retrying', 'queued'), ('retrying', 'cancelled'),
    ('retrying', 'failed');

COMMENT ON TABLE job_state_transitions IS
    'The legal job state transitions; jobs_guard_update() refuses every other change of state.';

CREATE FUNCTION jobs_guard_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.state <> 'queued' OR NEW.attempt <> 0 OR NEW.attempts_spent <> 0 THEN
        RAISE EXCEPTION 'a new job starts queued at attempt 0 (got state %, attempt %)',
            NEW.state, NEW.attempt
            USING ERRCODE = 'check_violation';
    END IF;
    RETURN NEW;
END;
$$;

CREATE FUNCTION jobs_guard_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF OLD.state IN ('succeeded', 'failed', 'cancelled') THEN
        RAISE EXCEPTION 'job % is % (terminal) and cannot change', OLD.id, OLD.state
            USING ERRCODE = 'check_violation',
                  HINT = 'Terminal jobs are final; submit the document again to convert it again.';
    END IF;
    IF NEW.id <> OLD.id THEN
        RAISE EXCEPTION 'job ids never change' USING ERRCODE = 'check_violation';
    END IF;
    IF NEW.state <> OLD.state AND NOT EXISTS (
        SELECT 1 FROM job_state_transitions t
        WHERE t.from_state = OLD.state AND t.to_state = NEW.state
    ) THEN
        RAISE EXCEPTION 'illegal job state transition % -> % (job %)', OLD.state, NEW.state, OLD.id
            USING ERRCODE = 'check_violation',
                  HINT = 'Legal transitions are listed in the table job_state_transitions.';
    END IF;
    IF NEW.attempt <> OLD.attempt
        AND NOT (NEW.state = 'running' AND OLD.state <> 'running' AND NEW.attempt = OLD.attempt + 1)
    THEN
        RAISE EXCEPTION 'attempt of job % may only grow by one on entering running (% -> %)',
            OLD.id, OLD.attempt, NEW.attempt
            USING ERRCODE = 'check_violation';
    END IF;
    IF NEW.state = 'running' AND OLD.state <> 'running' AND NEW.attempt = OLD.attempt THEN
        RAISE EXCEPTION 'entering running must start a new attempt (job %)', OLD.id
            USING ERRCODE = 'check_violation';
    END IF;

    -- What follows from the state, derived here so hand-typed transitions stay consistent.
    NEW.updated_at := now();
    IF NEW.state <> 'running' THEN
        NEW.lease_owner := NULL;
        NEW.lease_expires_at := NULL;
    END IF;
    IF NEW.state = 'running' AND OLD.state <> 'running' THEN
        NEW.started_at := coalesce(OLD.started_at, now());
        NEW.next_attempt_at := NULL;
    END IF;
    IF NEW.state IN ('succeeded', 'failed', 'cancelled') THEN
        NEW.finished_at := now();
    END IF;
    RETURN NEW;
END;
$$;

CREATE TRIGGER jobs_guard_insert BEFORE INSERT ON jobs
    FOR EACH ROW EXECUTE FUNCTION jobs_guard_insert();
CREATE TRIGGER jobs_guard_update BEFORE UPDATE ON jobs
    FOR EACH ROW EXECUTE FUNCTION jobs_guard_update();

-- Results are written only by the transaction that marks their job succeeded, for the attempt
-- that succeeded: the job row must be succeeded, at that attempt, and written by this very
-- transaction (its xmin is our transaction id). A stale duplicate cannot get there (its guarded
-- UPDATE matched no row), nor can a later transaction add to a finished job. Results never
-- change once written; deleting them (to purge old content) is allowed.
CREATE FUNCTION results_guard_insert() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    job_state   text;
    job_attempt integer;
    written_now boolean;
BEGIN
    SELECT j.state, j.attempt, j.xmin = pg_current_xact_id()::xid
      INTO job_state, job_attempt, written_now
      FROM jobs j WHERE j.id = NEW.job_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'no job % for this result', NEW.job_id USING ERRCODE = 'foreign_key_violation';
    END IF;
    IF job_state <> 'succeeded' OR job_attempt <> NEW.attempt OR NOT written_now THEN
        RAISE EXCEPTION 'results of job % (attempt %) may only be stored by the transaction that marks that attempt succeeded (job is %, attempt %)',
            NEW.job_id, NEW.attempt, job_state, job_attempt
            USING ERRCODE = 'check_violation';
    END IF;
    RETURN NEW;
END;
$$;

CREATE FUNCTION results_refuse_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'results are immutable (job %, format %)', OLD.job_id, OLD.format
        USING ERRCODE = 'check_violation';
END;
$$;

CREATE TRIGGER results_guard_insert BEFORE INSERT ON results
    FOR EACH ROW EXECUTE FUNCTION results_guard_insert();
CREATE TRIGGER results_refuse_update BEFORE UPDATE ON results
    FOR EACH ROW EXECUTE FUNCTION results_refuse_update();
