-- 0025: a job's writes pay only for the guarantees they touch.
--
-- Every guarantee stays: the database refuses an illegal change of state (0003), every change
-- of state is in the job's trail (0004), the lanes count the queued jobs (0019), updated_at
-- moves when the job changes and not for its progress (0010), results are stored only by the
-- transaction that marks their attempt succeeded (0003). What changes is who pays:
--
-- - the guard was a plpgsql call for every UPDATE, and the history a statement trigger with
--   transition tables, which made PostgreSQL copy the old and new rows of every UPDATE (a lease
--   renewal's, a stage's) into tuplestores to join them and find no change of state. Both are
--   now one row trigger that runs only when the state or the attempt changes (or the row is
--   final, which it refuses), and writes the event itself; it also counts the lanes a change of
--   state moves a job in or out of (the lanes' own trigger is left with lane moves of queued
--   jobs). A write that changes neither calls no function at all: the WHEN clauses are
--   evaluated by the executor, and a lease renewal or a stage is in no trigger's column list.
-- - updated_at for the other changes (a source's facts, a due time) has its own trigger, called
--   only for updates that set a column other than the progress ones.
-- - a lease renewal was never updated in place: the reconciler's index on lease_expires_at made
--   every renewal a new row version with an entry in each of the table's indexes. The sweep now
--   reads the running jobs (few, and already indexed by tenant) and sorts them by lease.
-- - a result's engine is taken from the note finish_attempt is given, and its guard and its
--   engine lookup are one trigger; an attempt's calls go to the trail in one INSERT.

-- The guard, the history and the lanes, for a change of state (or of attempt, or of id, each
-- refused unless it is a claim's), and for any change of a final row (refused).
CREATE OR REPLACE FUNCTION jobs_guard_update() RETURNS trigger LANGUAGE plpgsql AS $$
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

    -- Past the checks the state changed: what follows from it, derived here so hand-typed
    -- transitions stay consistent (0003, 0010).
    NEW.updated_at := now();
    IF NEW.state <> 'running' THEN
        NEW.lease_owner := NULL;
        NEW.lease_expires_at := NULL;
    END IF;
    IF NEW.state = 'running' THEN
        NEW.started_at := coalesce(OLD.started_at, now());
        NEW.next_attempt_at := NULL;
    END IF;
    IF NEW.state IN ('succeeded', 'failed', 'cancelled') THEN
        NEW.finished_at := now();
    END IF;

    -- The trail (0004), with the row as it will be written. Should the UPDATE fail after this,
    -- the event goes with it: it is one statement.
    INSERT INTO job_events (job_id, attempt, kind, from_state, to_state, error_code,
                            server_origin, detail)
    VALUES (NEW.id, NEW.attempt, 'state_change', OLD.state, NEW.state,
            CASE WHEN NEW.state IN ('failed', 'retrying') THEN NEW.error_code END,
            NEW.server_origin,
            jsonb_strip_nulls(jsonb_build_object(
                'reason', nullif(current_setting('doclane.reason', true), ''),
                'worker', coalesce(NEW.lease_owner, OLD.lease_owner),
                'error_message', CASE WHEN NEW.state IN ('failed', 'retrying')
                                      THEN NEW.error_message END,
                'next_attempt_at', NEW.next_attempt_at,
                'attempts_spent', NEW.attempts_spent,
                'max_attempts', NEW.max_attempts)));

    -- The lanes (0019): out of the old one on leaving queued, into the new one on entering.
    IF OLD.state = 'queued' THEN
        PERFORM tenant_lane_add(OLD.queue, OLD.priority, OLD.tenant, -1);
    END IF;
    IF NEW.state = 'queued' THEN
        PERFORM tenant_lane_add(NEW.queue, NEW.priority, NEW.tenant, 1);
    END IF;
    RETURN NEW;
END;
$$;

DROP TRIGGER jobs_guard_update ON jobs;
CREATE TRIGGER jobs_guard_update BEFORE UPDATE ON jobs
    FOR EACH ROW
    WHEN (OLD.state IN ('succeeded', 'failed', 'cancelled')
          OR OLD.state IS DISTINCT FROM NEW.state
          OR OLD.attempt IS DISTINCT FROM NEW.attempt
          OR OLD.id IS DISTINCT FROM NEW.id)
    EXECUTE FUNCTION jobs_guard_update();

DROP TRIGGER jobs_log_update ON jobs;
DROP FUNCTION jobs_log_update();
DROP FUNCTION jobs_state_event_detail(jobs, text);

-- updated_at for a change of a live job that is not a change of state (0010): any column but
-- a running attempt's progress (stage, server, lease) and updated_at itself; a writer that sets
-- only updated_at keeps its value. The column list is every other column of jobs (a test holds
-- it to that), so a lease renewal or a stage does not even test the WHEN.
CREATE FUNCTION jobs_touch_update() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    unchanged jobs;
BEGIN
    unchanged := NEW;
    unchanged.stage := OLD.stage;
    unchanged.server_origin := OLD.server_origin;
    unchanged.lease_expires_at := OLD.lease_expires_at;
    unchanged.updated_at := OLD.updated_at;
    IF unchanged IS DISTINCT FROM OLD THEN
        NEW.updated_at := now();
    END IF;
    IF NEW.state <> 'running' THEN  -- only a running job holds a lease (0003)
        NEW.lease_owner := NULL;
        NEW.lease_expires_at := NULL;
    END IF;
    RETURN NEW;
END;
$$;

CREATE TRIGGER jobs_touch_update
    BEFORE UPDATE OF id, source_kind, source_uri, size_bytes, content_sha256, profile, options,
                     formats, queue, priority, state, attempt, attempts_spent, max_attempts,
                     lease_owner, next_attempt_at, error_code, error_message, error_detail,
                     created_at, started_at, finished_at, source_fetch_uri, webhook_url,
                     submission_id, parent_id, slices_total, slices_done, tenant, trace_context
    ON jobs
    FOR EACH ROW
    WHEN (OLD.state NOT IN ('succeeded', 'failed', 'cancelled')
          AND OLD.state = NEW.state AND OLD.attempt = NEW.attempt AND OLD.id = NEW.id)
    EXECUTE FUNCTION jobs_touch_update();

-- The lanes' own trigger keeps what the guard does not see: a queued job moved to another
-- lane (queue, priority or tenant) without a change of state.
CREATE OR REPLACE FUNCTION tenant_lanes_count_updated() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM tenant_lane_add(OLD.queue, OLD.priority, OLD.tenant, -1);
    PERFORM tenant_lane_add(NEW.queue, NEW.priority, NEW.tenant, 1);
    RETURN NULL;
END
$$;

DROP TRIGGER jobs_count_lanes_updated ON jobs;
CREATE TRIGGER jobs_count_lanes_updated
    AFTER UPDATE OF queue, priority, tenant ON jobs
    FOR EACH ROW
    WHEN (OLD.state = 'queued' AND NEW.state = 'queued'
          AND (OLD.queue IS DISTINCT FROM NEW.queue
               OR OLD.priority IS DISTINCT FROM NEW.priority
               OR OLD.tenant IS DISTINCT FROM NEW.tenant))
    EXECUTE FUNCTION tenant_lanes_count_updated();

-- Lease renewals in place (HOT): no index reads lease_expires_at any more. The expired-lease
-- sweep finds the running jobs through jobs_tenant_running_idx (0019), as few as run at once.
DROP INDEX jobs_lease_expiry_idx;

-- A result's guard (0003) and its engine (0013) in one call: the engine, when the writer does
-- not give it, from the attempt's last note that names one.
CREATE OR REPLACE FUNCTION results_guard_insert() RETURNS trigger LANGUAGE plpgsql AS $$
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
    IF NEW.engine IS NULL THEN
        SELECT detail->>'engine' INTO NEW.engine
          FROM job_events
         WHERE job_id = NEW.job_id AND attempt = NEW.attempt AND kind = 'note'
           AND detail ? 'engine'
         ORDER BY id DESC
         LIMIT 1;
    END IF;
    RETURN NEW;
END;
$$;

DROP TRIGGER results_engine ON results;
DROP FUNCTION result_engine();

-- The trail's calls in one INSERT, in the order given (the identity follows the rows' order).
CREATE OR REPLACE FUNCTION insert_mcp_calls(p_job_id uuid, p_attempt integer, p_calls jsonb)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    IF p_calls IS NULL OR jsonb_array_length(p_calls) = 0 THEN
        RETURN;
    END IF;
    INSERT INTO job_events (job_id, attempt, kind, tool, duration_ms, outcome, error_code,
                            server_origin, detail)
    SELECT p_job_id, p_attempt, 'mcp_call', c.value->>'tool', (c.value->>'duration_ms')::float8,
           c.value->>'outcome', c.value->>'error_code', c.value->>'origin',
           nullif(c.value->'detail', 'null')
      FROM jsonb_array_elements(p_calls) WITH ORDINALITY AS c(value, n)
     ORDER BY c.n;
END;
$$;

-- finish_attempt (0011) as it was, but the results name their engine from the note given, so
-- the guard need not look it up.
CREATE OR REPLACE FUNCTION finish_attempt(p_job_id uuid, p_attempt integer, p_formats text[],
                                          p_contents text[], p_calls jsonb, p_note jsonb,
                                          p_origin text DEFAULT NULL)
RETURNS text[] LANGUAGE plpgsql AS $$
DECLARE
    wanted text[];
BEGIN
    PERFORM insert_mcp_calls(p_job_id, p_attempt, p_calls);
    IF p_note IS NOT NULL THEN
        INSERT INTO job_events (job_id, attempt, kind, detail)
        VALUES (p_job_id, p_attempt, 'note', p_note);
    END IF;
    UPDATE jobs
       SET state = 'succeeded', stage = NULL, server_origin = coalesce(p_origin, server_origin),
           error_code = NULL, error_message = NULL, error_detail = NULL
     WHERE id = p_job_id AND attempt = p_attempt AND state = 'running'
    RETURNING formats INTO wanted;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    IF (SELECT array_agg(f ORDER BY f) FROM unnest(wanted) f)
       IS DISTINCT FROM (SELECT array_agg(DISTINCT f ORDER BY f) FROM unnest(p_formats) f)
       OR cardinality(p_formats) <> cardinality(p_contents) THEN
        RAISE EXCEPTION 'job % wants formats %, got results for %', p_job_id, wanted, p_formats
            USING ERRCODE = 'DL001';
    END IF;
    INSERT INTO results (job_id, format, attempt, content, engine)
    SELECT p_job_id, r.format, p_attempt, r.content, p_note->>'engine'
    FROM unnest(p_formats, p_contents) AS r(format, content);
    RETURN wanted;
END;
$$;

-- A round's ends in one statement (its results stored together, one commit): finish_attempt's
-- work for many attempts, each fenced on its own. Attempt n of the arrays is p_job_ids[n],
-- p_attempts[n], p_origins[n], p_calls[n] (a JSON array, or NULL), p_notes[n]; its results are
-- the elements of p_formats and p_contents whose p_result_of is n. The calls and notes are kept
-- even for an attempt that no longer owns its job, in the order given; one UPDATE moves every
-- attempt that still does to succeeded, so the guard's row trigger runs for those rows only.
-- Results that are not exactly a stored job's formats undo everything (SQLSTATE DL001). Returns
-- whether each attempt was stored, in the order given.
CREATE FUNCTION finish_attempts(p_job_ids uuid[], p_attempts integer[], p_origins text[],
                                p_calls jsonb[], p_notes jsonb[], p_result_of integer[],
                                p_formats text[], p_contents text[])
RETURNS boolean[] LANGUAGE plpgsql AS $$
DECLARE
    stored uuid[];
    wrong uuid;
BEGIN
    IF cardinality(p_result_of) IS DISTINCT FROM cardinality(p_formats)
       OR cardinality(p_formats) IS DISTINCT FROM cardinality(p_contents) THEN
        RAISE EXCEPTION 'results of % formats with % contents for % jobs', cardinality(p_formats),
            cardinality(p_contents), cardinality(p_job_ids)
            USING ERRCODE = 'DL001';
    END IF;

    INSERT INTO job_events (job_id, attempt, kind, tool, duration_ms, outcome, error_code,
                            server_origin, detail)
    SELECT e.job_id, e.attempt, e.kind, e.tool, e.duration_ms, e.outcome, e.error_code,
           e.origin, e.detail
      FROM (SELECT a.n, c.k, a.job_id, a.attempt, 'mcp_call' AS kind, c.value->>'tool' AS tool,
                   (c.value->>'duration_ms')::float8 AS duration_ms, c.value->>'outcome' AS outcome,
                   c.value->>'error_code' AS error_code, c.value->>'origin' AS origin,
                   nullif(c.value->'detail', 'null') AS detail
              FROM unnest(p_job_ids, p_attempts, p_calls) WITH ORDINALITY AS a(job_id, attempt, calls, n)
             CROSS JOIN LATERAL jsonb_array_elements(a.calls) WITH ORDINALITY AS c(value, k)
            UNION ALL
            SELECT a.n, 9223372036854775807, a.job_id, a.attempt, 'note', NULL, NULL, NULL, NULL,
                   NULL, a.note
              FROM unnest(p_job_ids, p_attempts, p_notes) WITH ORDINALITY AS a(job_id, attempt, note, n)
             WHERE a.note IS NOT NULL) e
     ORDER BY e.n, e.k;

    WITH done AS (
        UPDATE jobs j
           SET state = 'succeeded', stage = NULL, server_origin = coalesce(a.origin, j.server_origin),
               error_code = NULL, error_message = NULL, error_detail = NULL
          FROM unnest(p_job_ids, p_attempts, p_origins) WITH ORDINALITY AS a(job_id, attempt, origin, n)
         WHERE j.id = a.job_id AND j.attempt = a.attempt AND j.state = 'running'
        RETURNING j.id, j.formats, a.n
    ), given AS (
        SELECT r.of, array_agg(DISTINCT r.format ORDER BY r.format) AS formats
          FROM unnest(p_result_of, p_formats) AS r(of, format)
         GROUP BY r.of
    )
    SELECT array_agg(d.id),
           (array_agg(d.id) FILTER (
               WHERE (SELECT array_agg(f ORDER BY f) FROM unnest(d.formats) f)
                     IS DISTINCT FROM g.formats))[1]
      INTO stored, wrong
      FROM done d LEFT JOIN given g ON g.of = d.n;
    IF wrong IS NOT NULL THEN
        RAISE EXCEPTION 'job % wants formats %, got results for %', wrong,
            (SELECT formats FROM jobs WHERE id = wrong),
            ARRAY(SELECT r.format FROM unnest(p_result_of, p_formats) AS r(of, format)
                  JOIN unnest(p_job_ids) WITH ORDINALITY AS a(job_id, n) ON a.n = r.of
                  WHERE a.job_id = wrong)
            USING ERRCODE = 'DL001';
    END IF;

    INSERT INTO results (job_id, format, attempt, content, engine)
    SELECT a.job_id, r.format, a.attempt, r.content, a.note->>'engine'
      FROM unnest(p_result_of, p_formats, p_contents) AS r(of, format, content)
      JOIN unnest(p_job_ids, p_attempts, p_notes) WITH ORDINALITY AS a(job_id, attempt, note, n)
        ON a.n = r.of
     WHERE a.job_id = ANY(stored);

    RETURN ARRAY(SELECT coalesce(a.job_id = ANY(stored), false)
                   FROM unnest(p_job_ids) WITH ORDINALITY AS a(job_id, n) ORDER BY a.n);
END;
$$;

COMMENT ON FUNCTION finish_attempts(uuid[], integer[], text[], jsonb[], jsonb[], integer[], text[],
                                    text[]) IS
    'A round''s ends in one statement (migration 0025): finish_attempt for many attempts, each '
    'fenced on its own; whether each was stored.';

-- A lease renewal in one statement, fenced as before, committed without waiting for the WAL
-- flush (a progress report, as record_progress is): it was BEGIN, SET LOCAL, the UPDATE and
-- COMMIT. True when the attempt still owns the job.
CREATE FUNCTION renew_lease(p_job_id uuid, p_attempt integer, p_lease_s float8)
RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    PERFORM set_config('synchronous_commit', 'off', true);
    UPDATE jobs SET lease_expires_at = now() + make_interval(secs => p_lease_s)
     WHERE id = p_job_id AND attempt = p_attempt AND state = 'running';
    RETURN FOUND;
END;
$$;
