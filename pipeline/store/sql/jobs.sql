-- The life of one job, as the workers drive it. Every write after the claim is guarded by
-- (id, attempt, state = 'running'): a stale duplicate matches no row and writes nothing. The
-- database's triggers (migrations 0003, 0004, 0025) refuse illegal transitions and log every
-- change of state to job_events; a write that changes no state (a lease, a stage) calls none.

-- name: copy_jobs
-- Bulk submission: one COPY for any number of jobs (ids are chosen by the caller).
COPY jobs (id, source_kind, source_uri, source_fetch_uri, size_bytes, content_sha256, profile,
           options, formats, queue, priority, max_attempts, webhook_url, submission_id,
           trace_context, tenant)
FROM STDIN (FORMAT binary)

-- name: find_succeeded_by_content
-- Dedup candidates: the newest succeeded job per (content, profile, options, formats) among
-- the given hashes; the caller matches profile, options and formats exactly. A job whose
-- results expired (retention) has nothing to give: it is no candidate. With an engine
-- (DOCLANE_DEDUP_ENGINE), only a job whose results that engine made: its name alone
-- ("docling-rs") matches every version, a name and version ("docling-rs 2.52.7") that one;
-- a result of unknown engine (NULL, before migration 0013) matches none. Only the tenants'
-- own jobs: another tenant's job is not theirs to read.
SELECT DISTINCT ON (content_sha256, profile, options, formats, tenant)
       id, content_sha256, profile, options, formats, tenant
FROM jobs
WHERE state = 'succeeded' AND content_sha256 = ANY(%(hashes)s::text[])
  AND tenant = ANY(%(tenants)s::text[])
  AND NOT EXISTS (SELECT 1 FROM result_expiries x WHERE x.job_id = jobs.id)
  AND (%(engine)s::text IS NULL OR EXISTS (
        SELECT 1 FROM results r
        WHERE r.job_id = jobs.id
          AND (r.engine = %(engine)s::text OR starts_with(r.engine, %(engine)s::text || ' '))))
ORDER BY content_sha256, profile, options, formats, tenant, finished_at DESC

-- name: split_job
-- A queued job split into slices, one a page run, in page order (migration 0017): the slices'
-- ids, whose messages are published after commit; the job itself waits for them.
SELECT * FROM split_job(%(job_id)s, %(pages)s::text[])

-- name: get_job
SELECT * FROM jobs WHERE id = %(job_id)s

-- name: get_jobs
SELECT * FROM jobs WHERE id = ANY(%(job_ids)s::uuid[])

-- name: get_slices
-- A split job's slices, in page order (migration 0017).
SELECT * FROM jobs WHERE parent_id = %(job_id)s ORDER BY slice_first_page(options)

-- name: finished_among
-- Which of these jobs have finished, and how (a waiting submitter's poll: no whole rows).
SELECT id, state FROM jobs
WHERE id = ANY(%(job_ids)s::uuid[]) AND state IN ('succeeded', 'failed', 'cancelled')

-- name: claim_job
-- This very job, a new attempt (the fencing token) and a lease, by the one claim (migration
-- 0012 says which jobs may be claimed and what a claim writes); no row when the job may not be
-- claimed now. Not the workers' claim (claim_queue: the fair order, the tenants' caps): for
-- tools and tests that mean one job.
-- The attempt starts by validating its source: the stage is set here, a round trip fewer than
-- a write of its own.
SELECT * FROM claim_jobs(ARRAY[%(job_id)s]::uuid[], %(worker)s, %(lease_s)s, 'validating')

-- name: claim_queue
-- A drain's claim (migration 0026's claim_queue): the queue's due retries staged, then the fair
-- order's next job and, with %(limit)s > 1, companions like it (a round's or a batch's), the
-- lead first; what the claim found is on every row (one row without a job when none).
SELECT c.found::text AS found, (c.job).*
FROM claim_queue(%(queue)s, %(limit)s, %(worker)s, %(lease_s)s, 'validating',
                 %(small_below)s) c

-- name: make_due
-- A retrying job made due now (an operator's "retry now").
UPDATE jobs
SET next_attempt_at = now()
WHERE id = %(job_id)s AND state = 'retrying'

-- name: renew_lease
-- The lease, fenced on the attempt: one statement, committed without waiting for the WAL flush
-- (migration 0025); true when the attempt still owns the job.
SELECT renew_lease(%(job_id)s, %(attempt)s, %(lease_s)s)

-- name: record_progress
-- The stage, the server and the calls since the attempt's last write: one statement, committed
-- without waiting for the WAL flush (migration 0009).
SELECT record_progress(%(job_id)s, %(attempt)s, %(stage)s, %(origin)s, %(calls)s)

-- name: record_source
-- What the worker learnt about a source it downloaded (a URL's real size and hash).
UPDATE jobs
SET size_bytes = %(size_bytes)s, content_sha256 = %(content_sha256)s
WHERE id = %(job_id)s AND attempt = %(attempt)s AND state = 'running'

-- name: finish_attempt
-- The calls, a note, running -> succeeded with the server and the results, one statement
-- (migrations 0009, 0011); for results small enough to be parameters (larger ones:
-- mark_succeeded and copy_results).
SELECT finish_attempt(%(job_id)s, %(attempt)s, %(formats)s, %(contents)s, %(calls)s, %(note)s,
                      %(origin)s)

-- name: finish_attempts
-- A round's ends, each as finish_attempt's, in one statement (migration 0025): whether each
-- attempt was stored, in the order given. Results are flattened: result n belongs to attempt
-- result_of[n] (1-based).
SELECT finish_attempts(%(job_ids)s::uuid[], %(attempts)s::integer[], %(origins)s::text[],
                       %(calls)s::jsonb[], %(notes)s::jsonb[], %(result_of)s::integer[],
                       %(formats)s::text[], %(contents)s::text[])

-- name: mark_succeeded
UPDATE jobs
SET state = 'succeeded', stage = NULL, server_origin = coalesce(%(origin)s, server_origin),
    error_code = NULL, error_message = NULL, error_detail = NULL
WHERE id = %(job_id)s AND attempt = %(attempt)s AND state = 'running'
RETURNING formats

-- name: copy_results
-- Accepted only in the transaction that just ran mark_succeeded for this attempt (0003).
-- Binary COPY, written by pipeline/store/large_values.py: results can be tens of megabytes.
COPY results (job_id, format, attempt, content) FROM STDIN (FORMAT binary)

-- name: mark_failed
-- The stage, when given, is the step the attempt failed in (a held stage was never written).
UPDATE jobs
SET state = 'failed', stage = coalesce(%(stage)s, stage),
    error_code = %(error_code)s, error_message = %(error_message)s, error_detail = %(error_detail)s
WHERE id = %(job_id)s AND attempt = %(attempt)s AND state = 'running'

-- name: schedule_retry
-- running -> retrying, or -> failed when a charged attempt was the last one. An uncharged retry
-- (the circuit breaker was open: the server was never asked) refunds the claim's attempt.
UPDATE jobs
SET state = CASE WHEN %(spend)s AND attempts_spent >= max_attempts
                 THEN 'failed' ELSE 'retrying' END,
    attempts_spent = attempts_spent - CASE WHEN %(spend)s THEN 0 ELSE 1 END,
    next_attempt_at = CASE WHEN %(spend)s AND attempts_spent >= max_attempts
                           THEN NULL ELSE now() + make_interval(secs => %(delay_s)s) END,
    stage = coalesce(%(stage)s, stage),
    error_code = %(error_code)s, error_message = %(error_message)s, error_detail = %(error_detail)s
WHERE id = %(job_id)s AND attempt = %(attempt)s AND state = 'running'
RETURNING state

-- name: lock_slices
-- A split job's slices, locked before the job itself (cancel): a slice's finishing transaction
-- holds its slice and then, at commit, locks the job (migration 0017); taking them in that
-- same order means the two wait for each other instead of deadlocking.
SELECT id FROM jobs WHERE parent_id = %(job_id)s ORDER BY id FOR UPDATE

-- name: lock_job_state
SELECT state FROM jobs WHERE id = %(job_id)s FOR UPDATE

-- name: cancel_job
UPDATE jobs
SET state = 'cancelled'
WHERE id = %(job_id)s AND state IN ('queued', 'waiting', 'running', 'retrying')
RETURNING *

-- name: set_reason
-- Why the next change of state happens; read by the event trigger (0004), gone at commit.
SELECT set_config('doclane.reason', %(reason)s, true)
