-- 0012: one claim, the same for a job claimed alone and for the jobs that share a batch.
--
-- The claim's rules were written twice, once per query (a job's claim and the batch's claim of
-- its companions), and had to change together. They are now this function's, and both claims
-- call it: which states may be claimed (queued, or retrying once its next_attempt_at has come:
-- a duplicate message must not skip the backoff), and what a claim writes (the next attempt,
-- the fencing token every later write is guarded by; an attempt charged; the worker's lease;
-- the stage the attempt starts in). A job running elsewhere, finished or cancelled matches
-- nothing. The trigger of 0003/0010 checks the transition and the attempt's growth and derives
-- the rest (started_at, next_attempt_at), and 0004's logs the change of state to job_events.
--
-- A batch claims companions it has locked as queued (sql/batches.sql: batch_candidates) in the
-- same transaction, so the retrying rule never applies to them; a lone claim is the job's
-- first write of its attempt and starts it in the 'validating' stage (a round trip fewer than a
-- stage write of its own), a batch member's stage is written by the batch.
--
-- PL/pgSQL rather than SQL: its statement's plan is kept for the session, where a SQL
-- function's body is planned again at every call, and a claim is on every job's path.

CREATE FUNCTION claim_jobs(p_job_ids uuid[], p_worker text, p_lease_s float8, p_stage text)
RETURNS SETOF jobs LANGUAGE plpgsql AS $$
BEGIN
    RETURN QUERY
    UPDATE jobs
       SET state = 'running',
           attempt = attempt + 1,
           attempts_spent = attempts_spent + 1,
           lease_owner = p_worker,
           lease_expires_at = now() + make_interval(secs => p_lease_s),
           stage = p_stage
     WHERE id = ANY(p_job_ids)
       AND (state = 'queued'
            OR (state = 'retrying' AND (next_attempt_at IS NULL OR next_attempt_at <= now())))
    RETURNING *;
END;
$$;

COMMENT ON FUNCTION claim_jobs(uuid[], text, float8, text) IS
    'The one claim (migration 0012): queued|due retrying -> running with the next attempt, '
    'an attempt charged and a lease; used by a lone claim and by a batch''s claim alike.';
