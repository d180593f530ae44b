-- The reconciler's sweeps. Both take a bounded batch with SKIP LOCKED, so a sweep never waits
-- on a worker that is finishing a job right now, and two reconcilers never take the same row.
-- %(now)s is NULL in production (the database's clock); tests pass a time to skip ahead.

-- name: requeue_expired_leases
-- running jobs whose lease expired (the worker died or overran): back to the queue, or failed
-- with E303 when that was their last attempt.
UPDATE jobs j
SET state = CASE WHEN j.attempts_spent >= j.max_attempts THEN 'failed' ELSE 'queued' END,
    error_code = CASE WHEN j.attempts_spent >= j.max_attempts THEN 'E303' ELSE j.error_code END,
    error_message = CASE WHEN j.attempts_spent >= j.max_attempts
        THEN 'lease expired on the last attempt: the worker was lost or exceeded its time limit'
        ELSE j.error_message END
FROM (
    SELECT id FROM jobs
    WHERE state = 'running' AND lease_expires_at < coalesce(%(now)s::timestamptz, now())
    ORDER BY lease_expires_at
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
) expired
WHERE j.id = expired.id
RETURNING j.id, j.state

-- name: running_attempts
-- Which of these jobs are running, and in which attempt: a scratch folder of an attempt that is
-- not running any more (finished, requeued, or its worker was killed) may be removed.
SELECT id, attempt FROM jobs WHERE state = 'running' AND id = ANY(%(job_ids)s::uuid[])

-- name: claimable_queues
-- Jobs a drain could take now, by queue (migration 0021): where the reconciler rings.
SELECT queue, claimable FROM claimable_queues()

-- name: named_uploads
-- Which of these files (in the inbox's uploads folder) a job names: the others' folders may be
-- removed. The LIKE is the uploads index's predicate, which the planner needs to see here.
SELECT DISTINCT source_uri FROM jobs
WHERE source_kind = 'file' AND source_uri LIKE '%%/uploads/%%'
  AND source_uri = ANY(%(paths)s::text[])
