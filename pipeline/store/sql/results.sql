-- Reading results back. Content can be tens of megabytes: list without it, fetch one at a time.

-- name: list_results
SELECT job_id, format, attempt, coalesce(size_bytes, object_size) AS size_bytes, engine,
       created_at
FROM results WHERE job_id = %(job_id)s ORDER BY format

-- name: get_result
SELECT content FROM results WHERE job_id = %(job_id)s AND format = %(format)s

-- name: copy_result_out
-- The content as raw UTF-8 bytes, straight from the server's buffer to a file (binary COPY).
COPY (SELECT content FROM results WHERE job_id = %(job_id)s AND format = %(format)s)
TO STDOUT (FORMAT binary)

-- name: result_location
-- Where one result is: here (object_uri NULL) or in the object store. No content is read.
SELECT object_uri FROM results WHERE job_id = %(job_id)s AND format = %(format)s

-- name: result_expiry
SELECT expired_at, formats FROM result_expiries WHERE job_id = %(job_id)s

-- name: insert_result_object
-- Accepted only in the transaction that just ran mark_succeeded for this attempt (0003).
INSERT INTO results (job_id, format, attempt, object_uri, object_size, object_sha256)
VALUES (%(job_id)s, %(format)s, %(attempt)s, %(object_uri)s, %(object_size)s, %(object_sha256)s)

-- name: referenced_objects
SELECT object_uri FROM results WHERE object_uri = ANY(%(uris)s)

-- name: expire_results
-- The retention sweep: the oldest results past the cutoff, a batch at a time, deleted; each
-- job they belonged to is marked expired (once) and gets a note in its history. Rows locked
-- by another sweep are skipped, so several reconcilers never take the same batch.
WITH old AS (
    SELECT job_id, format FROM results
    WHERE created_at < %(cutoff)s
    ORDER BY created_at
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
), gone AS (
    DELETE FROM results r USING old
    WHERE r.job_id = old.job_id AND r.format = old.format
    RETURNING r.job_id, r.format, r.attempt, r.object_uri
), marked AS (
    INSERT INTO result_expiries (job_id, formats)
    SELECT job_id, array_agg(format ORDER BY format) FROM gone GROUP BY job_id
    ON CONFLICT (job_id) DO UPDATE
        SET formats = (SELECT array_agg(DISTINCT f ORDER BY f)
                       FROM unnest(result_expiries.formats || excluded.formats) f)
    RETURNING job_id
), noted AS (
    INSERT INTO job_events (job_id, attempt, kind, detail)
    SELECT job_id, max(attempt), 'note',
           jsonb_build_object('note', 'results expired', 'formats', array_agg(format ORDER BY format))
    FROM gone GROUP BY job_id
)
SELECT job_id, format, object_uri FROM gone
