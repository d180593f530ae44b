-- What admins ask (doclane stats / doclane jobs). Each query has an index made for it in 0001;
-- bench/store_admin_queries.py proves them at a million jobs.

-- name: count_in_flight
-- Exact and cheap at any size: in-flight jobs are few (index-only scan of their index range).
SELECT state, count(*) AS jobs
FROM jobs
WHERE state IN ('queued', 'running', 'retrying')
GROUP BY state

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
