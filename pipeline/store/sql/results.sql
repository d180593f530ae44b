-- Reading results back. Content can be tens of megabytes: list without it, fetch one at a time.

-- name: list_results
SELECT job_id, format, attempt, size_bytes, engine, created_at
FROM results WHERE job_id = %(job_id)s ORDER BY format

-- name: get_result
SELECT content FROM results WHERE job_id = %(job_id)s AND format = %(format)s

-- name: copy_result_out
-- The content as raw UTF-8 bytes, straight from the server's buffer to a file (binary COPY).
COPY (SELECT content FROM results WHERE job_id = %(job_id)s AND format = %(format)s)
TO STDOUT (FORMAT binary)
