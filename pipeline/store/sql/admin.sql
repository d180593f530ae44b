-- What admins ask (doclane stats / doclane jobs). Each query has an index made for it in 0001;
-- bench/store_admin_queries.py proves them at a million jobs.

-- name: count_in_flight
-- Exact and cheap at any size: in-flight jobs are few (index-only scan of their index range).
SELECT state, count(*) AS jobs
FROM jobs
WHERE state IN ('queued', 'waiting', 'running', 'retrying')
  AND (%(tenant)s::text IS NULL OR tenant = %(tenant)s::text)
GROUP BY state

-- name: backlog
-- Queued jobs by queue and tenant, from the lanes' counts (one row a lane with work).
SELECT queue, tenant, sum(queued)::bigint AS queued
FROM tenant_lanes WHERE queued > 0
GROUP BY queue, tenant ORDER BY queue, tenant

-- name: oldest_queued
-- The oldest waiting job's age per queue, for the alert on a queue that does not drain: the
-- queued rows are few, read through jobs_state_created_idx.
SELECT queue, extract(epoch FROM now() - min(created_at))::float8 AS age_s
FROM jobs
WHERE state = 'queued'
GROUP BY queue

-- name: count_finished_since
-- Outcomes in a time window: an index-only range scan of jobs_finished_idx.
SELECT state, count(*) AS jobs FROM jobs WHERE finished_at >= %(since)s GROUP BY state

-- name: count_by_state
-- All-time totals: reads every row (about 0.14 s per million jobs); prefer the two above.
SELECT state, count(*) AS jobs FROM jobs GROUP BY state

-- name: failures_by_error_code
SELECT error_code, count(*) AS jobs
FROM jobs
WHERE finished_at >= %(since)s AND state = 'failed'
GROUP BY error_code
ORDER BY jobs DESC, error_code

-- name: recent_jobs
SELECT * FROM jobs ORDER BY created_at DESC LIMIT %(limit)s

-- name: recent_jobs_of_queue
SELECT * FROM jobs WHERE queue = %(queue)s ORDER BY created_at DESC LIMIT %(limit)s

-- name: recent_jobs_in_state
SELECT * FROM jobs WHERE state = %(state)s ORDER BY created_at DESC LIMIT %(limit)s

-- name: recent_jobs_with_error
SELECT * FROM jobs WHERE error_code = %(error_code)s ORDER BY updated_at DESC LIMIT %(limit)s

-- ---- doclane stats, doclane jobs, /metrics ---------------------------------------------------
-- Rollups (migration 0007): a finished job never changes and the trail is append-only, so the
-- all-time sums before a mark are kept in finished_rollup / event_rollup and readers add the rows
-- after the mark, an index range scan (jobs_finished_idx) or a BRIN scan (job_events_at_brin).

-- name: finished_totals
-- All-time finished jobs by state and error code: the kept sums plus what finished since the
-- mark (%(finished_before)s, from rollup_marks).
SELECT state, error_code, sum(jobs)::bigint AS jobs
FROM (
    SELECT state, error_code, jobs FROM finished_rollup
    UNION ALL
    SELECT state, coalesce(error_code, ''), count(*)
    FROM jobs
    WHERE finished_at >= %(finished_before)s
    GROUP BY 1, 2
) t
GROUP BY state, error_code

-- name: event_totals
-- All-time state changes (by the state entered) and MCP calls (by tool, outcome and latency
-- bucket), for /metrics: the kept sums plus what was logged since.
SELECT kind, name, outcome, bucket, sum(events)::bigint AS events,
       sum(duration_ms_sum)::float8 AS duration_ms_sum
FROM (
    SELECT kind, name, outcome, bucket, events, duration_ms_sum FROM event_rollup
    UNION ALL
    SELECT kind, name, outcome, bucket, count(*), sum(duration_ms)
    FROM countable_events
    WHERE at >= %(events_before)s
    GROUP BY 1, 2, 3, 4
) t
GROUP BY kind, name, outcome, bucket

-- name: rollup_marks
-- Read first and passed to the totals as values: planned with the value, the range scan after
-- the mark is exact (with a subquery there the planner guessed a third of the index: 28 ms
-- instead of 1 at a million jobs).
SELECT finished_before, events_before FROM rollup_marks

-- name: mcp_duration_bounds
SELECT mcp_duration_bounds() AS bounds

-- name: take_rollup_marks
-- Whoever reads first after the marks grew stale rolls up; a concurrent reader skips (SKIP
-- LOCKED) rather than waits. Marks trail the clock by %(margin_s)s: a row is stamped with its
-- transaction's start (finished_at) or its insert (at), and may commit later than that.
SELECT finished_before, events_before,
       now() - make_interval(secs => %(margin_s)s) AS until
FROM rollup_marks
WHERE least(finished_before, events_before) < now() - make_interval(secs => %(stale_s)s)
FOR UPDATE SKIP LOCKED

-- name: roll_up_finished
INSERT INTO finished_rollup AS r (state, error_code, jobs)
SELECT state, coalesce(error_code, ''), count(*)
FROM jobs
WHERE finished_at >= %(since)s AND finished_at < %(until)s
GROUP BY 1, 2
ON CONFLICT (state, error_code) DO UPDATE SET jobs = r.jobs + excluded.jobs

-- name: roll_up_events
INSERT INTO event_rollup AS r (kind, name, outcome, bucket, events, duration_ms_sum)
SELECT kind, name, outcome, bucket, count(*), sum(duration_ms)
FROM countable_events
WHERE at >= %(since)s AND at < %(until)s
GROUP BY 1, 2, 3, 4
ON CONFLICT (kind, name, outcome, bucket) DO UPDATE
SET events = r.events + excluded.events, duration_ms_sum = r.duration_ms_sum + excluded.duration_ms_sum

-- name: set_rollup_marks
UPDATE rollup_marks SET finished_before = %(until)s, events_before = %(until)s

-- name: throughput
-- Jobs finished in the last 1, 5 and 60 minutes, and per minute over the last hour (the status
-- page's chart): one index-only range scan of jobs_finished_idx.
SELECT least(floor(extract(epoch FROM now() - finished_at) / 60)::int, 59) AS minutes_ago,
       state,
       count(*) FILTER (WHERE finished_at >= now() - interval '1 minute') AS last_1m,
       count(*) FILTER (WHERE finished_at >= now() - interval '5 minutes') AS last_5m,
       count(*) AS last_60m
FROM jobs
WHERE finished_at >= now() - interval '60 minutes'
GROUP BY 1, 2

-- name: conversion_percentiles
-- p50/p95 of first claim to success, by size tier, over the jobs that succeeded recently.
SELECT CASE WHEN size_bytes IS NULL OR size_bytes >= %(medium_below)s THEN 'large'
            WHEN size_bytes >= %(small_below)s THEN 'medium'
            ELSE 'small' END AS tier,
       count(*) AS jobs,
       percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM finished_at - started_at))
           AS p50_s,
       percentile_cont(0.95) WITHIN GROUP (ORDER BY extract(epoch FROM finished_at - started_at))
           AS p95_s
FROM jobs
WHERE finished_at >= now() - make_interval(secs => %(window_s)s)
  AND state = 'succeeded' AND started_at IS NOT NULL
GROUP BY 1

-- name: list_jobs
-- doclane jobs / GET /v1/jobs: any mix of filters, newest first. Sent unprepared, so each call
-- is planned with its values and the unused filters fold away: state picks jobs_state_created_idx,
-- queue jobs_queue_created_idx, error code jobs_error_code_created_idx (0016), submission
-- jobs_submission_idx (0014), tenant jobs_tenant_created_idx (0019), none jobs_created_idx.
-- The keyset cursor (before_at, before_id) is the previous page's last row: its created_at bound
-- is what the index range scan starts from, the row comparison breaks ties (id orders them).
SELECT * FROM jobs
WHERE (%(state)s::text IS NULL OR state = %(state)s::text)
  AND (%(submission)s::uuid IS NULL OR submission_id = %(submission)s::uuid)
  AND (%(tenant)s::text IS NULL OR tenant = %(tenant)s::text)
  AND (%(error_code)s::text IS NULL OR error_code = %(error_code)s::text)
  AND (%(queue)s::text IS NULL OR queue = %(queue)s::text)
  AND (%(since)s::timestamptz IS NULL OR created_at >= %(since)s::timestamptz)
  AND (%(until)s::timestamptz IS NULL OR created_at < %(until)s::timestamptz)
  AND (%(before_at)s::timestamptz IS NULL OR (created_at <= %(before_at)s::timestamptz
       AND (created_at, id) < (%(before_at)s::timestamptz, %(before_id)s::uuid)))
ORDER BY created_at DESC, id DESC
LIMIT %(limit)s

-- name: batch_sizes
-- Batches whose members were noted since a time (every member of a batch gets one note naming
-- the batch and its size): how many batches, how many documents went in them, the largest.
SELECT count(DISTINCT detail->>'batch') AS batches,
       count(*) AS documents,
       coalesce(max((detail->>'size')::int), 0) AS largest
FROM job_events
WHERE kind = 'note' AND detail ? 'batch' AND at >= %(since)s
