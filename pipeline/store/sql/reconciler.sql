-- The reconciler's two sweeps. Both take a bounded batch with SKIP LOCKED, so a sweep never waits
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

-- name: take_stale_waiting
-- queued or retrying jobs that have waited longer than the threshold past their due time: their
-- message is presumed lost. Taking them restarts their clock (updated_at), so the next sweep
-- leaves them alone for another threshold, and notes it in their trail. %(queues)s (NULL: all)
-- limits the sweep to queues the reconciler found empty in the broker, %(states)s (NULL: both)
-- to one of the two states (the lost-message sweep takes retrying jobs on a shorter threshold).
-- Jobs of tenants paused or at their running cap are left alone: they wait for room, not for a
-- message (migration 0020: their messages were owed to the queue), so a paused tenant's million
-- jobs cost no message churn.
WITH stale AS (
    UPDATE jobs j
    SET updated_at = now()
    FROM (
        SELECT id FROM jobs
        WHERE state IN ('queued', 'retrying')
          AND (%(states)s::text[] IS NULL OR state = ANY(%(states)s::text[]))
          AND (%(queues)s::text[] IS NULL OR queue = ANY(%(queues)s::text[]))
          AND greatest(next_attempt_at, updated_at)
              < coalesce(%(now)s::timestamptz, now()) - make_interval(secs => %(older_than_s)s)
          AND tenant NOT IN (SELECT name FROM tenants
                             WHERE max_running = 0 OR tenant_room(name, false) = 0)
        ORDER BY greatest(next_attempt_at, updated_at)
        LIMIT %(limit)s
        FOR UPDATE SKIP LOCKED
    ) waiting
    WHERE j.id = waiting.id
    RETURNING j.id, j.attempt, j.state
), noted AS (
    INSERT INTO job_events (job_id, attempt, kind, detail)
    SELECT id, attempt, 'note',
           jsonb_build_object('reason', 'waited past the threshold; message presumed lost',
                              'state', state)
    FROM stale
)
SELECT id FROM stale

-- name: take_lost_queued
-- queued jobs of one queue, overdue by more than a short threshold, beyond the messages the
-- broker holds for that queue (%(waiting)s): the database has more jobs waiting than the broker
-- has messages, so that many messages were lost (a broker restarted without persistence, a
-- flushed queue). Which ones is not known; the oldest are taken, since the broker hands out the
-- oldest first and a message still in line is more likely a younger job's. Retrying jobs are
-- left to take_stale_waiting: their messages wait in the workers (a countdown), uncounted here.
-- Taking them restarts their clock and notes it in their trail, as take_stale_waiting does.
-- %(waiting)s counts the messages the queue is owed with the broker's (migration 0020), and jobs
-- of tenants paused or at their cap are not counted: they wait for room, not for a message.
WITH overdue AS (
    SELECT id, row_number() OVER (ORDER BY since, id) AS n, count(*) OVER () AS total
    FROM (
        SELECT id, greatest(next_attempt_at, updated_at) AS since
        FROM jobs
        WHERE state = 'queued' AND queue = %(queue)s
          AND greatest(next_attempt_at, updated_at)
              < coalesce(%(now)s::timestamptz, now()) - make_interval(secs => %(older_than_s)s)
          AND tenant NOT IN (SELECT name FROM tenants
                             WHERE max_running = 0 OR tenant_room(name, false) = 0)
        ORDER BY greatest(next_attempt_at, updated_at)
        LIMIT %(waiting)s::int + %(limit)s::int
    ) oldest
), lost AS (
    UPDATE jobs j
    SET updated_at = now()
    FROM (
        SELECT id FROM jobs
        WHERE id IN (SELECT id FROM overdue WHERE n <= total - %(waiting)s::int)
          AND state = 'queued'
        FOR UPDATE SKIP LOCKED
    ) taken
    WHERE j.id = taken.id
    RETURNING j.id, j.attempt, j.state
), noted AS (
    INSERT INTO job_events (job_id, attempt, kind, detail)
    SELECT id, attempt, 'note',
           jsonb_build_object('reason', 'more jobs waiting than messages in the broker; '
                                        'message presumed lost',
                              'state', state)
    FROM lost
)
SELECT id FROM lost

-- name: running_attempts
-- Which of these jobs are running, and in which attempt: a scratch folder of an attempt that is
-- not running any more (finished, requeued, or its worker was killed) may be removed.
SELECT id, attempt FROM jobs WHERE state = 'running' AND id = ANY(%(job_ids)s::uuid[])

-- name: take_owed
-- Owed messages to publish now (migration 0020's take_owed): the jobs to name, each queue's
-- debt lowered by as many, in the transaction that returns them.
SELECT id, queue, priority FROM take_owed(%(limit)s)

-- name: owed_by_queue
-- The messages each queue is owed: the lost-message sweep counts them with the broker's.
SELECT queue, owed FROM queue_debts WHERE owed > 0

-- name: capped_tenants
-- Tenants with a running cap (or paused): the end of one of their jobs may free room.
SELECT name FROM tenants WHERE max_running IS NOT NULL

-- name: named_uploads
-- Which of these files (in the inbox's uploads folder) a job names: the others' folders may be
-- removed. The LIKE is migration 0023's index predicate, which the planner needs to see here.
SELECT DISTINCT source_uri FROM jobs
WHERE source_kind = 'file' AND source_uri LIKE '%%/uploads/%%'
  AND source_uri = ANY(%(paths)s::text[])
