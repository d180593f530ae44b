-- A job's stage says where its attempt is, and where a failed one failed.
--
-- A worker that downloads a URL or an s3:// object now reports it (the 'fetching' stage), and
-- a failed or retrying job keeps the step its attempt failed in (mark_failed, schedule_retry)
-- instead of the last progress write, which a progress hold may never have made. Adding the
-- check scans the table once (a migration is one transaction, so the lock is held throughout;
-- a check on one column reads a million rows in well under a second).
ALTER TABLE jobs DROP CONSTRAINT jobs_stage_check;
ALTER TABLE jobs ADD CONSTRAINT jobs_stage_check
    CHECK (stage IN ('fetching', 'validating', 'converting', 'exporting', 'storing'));

COMMENT ON COLUMN jobs.stage IS
    'Progress of the current (or last) attempt: fetching, validating, converting, exporting, '
    'storing; for a failed or retrying job, the step its attempt failed in.';
