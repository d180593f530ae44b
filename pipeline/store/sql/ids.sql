-- Short ids: the first characters of a job's or a submission's id, as the console shows them
-- and people copy them. The text of a uuid orders as its bytes, so the ids that start with
-- "6f1d2c" are the range 6f1d2c00-0000-... to 6f1d2cff-ffff-...: an index range scan (the
-- primary key; jobs_submission_idx for submissions), never a scan of every id as text.
-- Scoped to one tenant when given: another tenant's ids are not even counted.

-- name: job_ids_by_prefix
-- At most two of the ids in the range, and how many there are (the window counts before the
-- limit).
SELECT id, count(*) OVER () AS matches
FROM jobs
WHERE id BETWEEN %(low)s AND %(high)s
  AND (%(tenant)s::text IS NULL OR tenant = %(tenant)s::text)
ORDER BY id
LIMIT 2

-- name: submission_ids_by_prefix
-- The distinct submissions in the range, one index probe each (a submission of a million jobs
-- is stepped over, not read), at most two of them and how many there are.
WITH RECURSIVE found(submission_id) AS (
    (SELECT submission_id FROM jobs
     WHERE submission_id BETWEEN %(low)s AND %(high)s
       AND (%(tenant)s::text IS NULL OR tenant = %(tenant)s::text)
     ORDER BY submission_id LIMIT 1)
    UNION ALL
    SELECT (SELECT j.submission_id FROM jobs j
            WHERE j.submission_id > found.submission_id AND j.submission_id <= %(high)s
              AND (%(tenant)s::text IS NULL OR j.tenant = %(tenant)s::text)
            ORDER BY j.submission_id LIMIT 1)
    FROM found
    WHERE found.submission_id IS NOT NULL
)
SELECT submission_id, count(*) OVER () AS matches
FROM found
WHERE submission_id IS NOT NULL
ORDER BY submission_id
LIMIT 2
