-- 0016: the job lists filtered by an error code, newest first, in the order they are shown.
--
-- doclane jobs --error-code, GET /v1/jobs?error_code= and the console's lists (which page by
-- keyset on (created_at, id)) order by creation; jobs_error_code_idx (0001) orders a code's
-- jobs by updated_at, for recent_jobs_with_error. With only that index, "failed with E303" at a
-- million jobs fetched every such job (8,000 scattered heap pages, 366 ms from a cold cache) to
-- sort them for a page of 50; along this index it reads the page's rows and stops. Partial: only
-- the few jobs that carry a code (failed or retrying) are in it, so a job that never fails
-- costs it nothing.
CREATE INDEX jobs_error_code_created_idx ON jobs (error_code, created_at DESC, id DESC)
    WHERE error_code IS NOT NULL;
