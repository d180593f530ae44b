-- Rounds: a worker that claimed a small job takes up to N-1 more due jobs that can share its
-- round (same queue, profile, options and formats, small), converts them concurrently and
-- stores their results together. Each taken job gets its own claim (attempt, lease) from the
-- one claim function (migration 0012); its broker message later finds nothing to claim.

-- name: claim_round
-- One statement: the candidates, locked with SKIP LOCKED (rows another worker is taking are
-- skipped, not waited for), by priority then age, claimed at once and started in the
-- 'validating' stage as a lone claim starts. Only never-tried file jobs (the batch claim's
-- index, migration 0006, serves the search): a job tried before goes alone, so a document
-- that broke a round (a worker killed mid-round) never takes companions with it again.
SELECT * FROM claim_jobs(
    ARRAY(SELECT id FROM jobs
          WHERE state = 'queued' AND attempt = 0 AND source_kind = 'file'
            AND queue = %(queue)s AND profile = %(profile)s
            AND options = %(options)s AND formats = %(formats)s::text[]
            AND size_bytes < %(small_below)s AND id <> %(lead)s
          ORDER BY priority DESC, created_at
          LIMIT %(limit)s
          FOR UPDATE SKIP LOCKED),
    %(worker)s, %(lease_s)s, 'validating')

-- name: claim_round_of
-- A message's claim with its round's, in one statement (one round trip, one commit): the job
-- the message names (as claim_job claims it), and up to %(limit)s due jobs that can share its
-- round, as claim_round takes them. Companions come when the job was claimed now for its first
-- try, or when it could not be claimed because it is running elsewhere or ended (its message
-- then still starts a round: the jobs like it that are due need a worker as much); never for a
-- job tried before nor for one waiting for its next try (its message comes back when due).
-- The job's own row gives the round's key; a job that is no small file has no round. Rows come
-- back with `round_lead`: true for the message's job.
WITH lead AS (
    SELECT * FROM claim_jobs(ARRAY[%(job_id)s]::uuid[], %(worker)s, %(lease_s)s, 'validating')
), round_key AS (
    SELECT x.queue, x.profile, x.options, x.formats
    FROM jobs x
    WHERE x.id = %(job_id)s AND x.source_kind = 'file' AND x.size_bytes < %(small_below)s
      AND CASE WHEN EXISTS (SELECT 1 FROM lead) THEN (SELECT attempt FROM lead) = 1
               ELSE x.state <> 'retrying' END
), companions AS (
    -- The key as scalar subqueries (evaluated once), so that the search is the index scan of
    -- claim_round (migration 0006), in order, up to the limit.
    SELECT * FROM claim_jobs(
        ARRAY(SELECT c.id FROM jobs c
              WHERE c.state = 'queued' AND c.attempt = 0 AND c.source_kind = 'file'
                AND c.queue = (SELECT queue FROM round_key)
                AND c.profile = (SELECT profile FROM round_key)
                AND c.options = (SELECT options FROM round_key)
                AND c.formats = (SELECT formats FROM round_key)
                AND c.size_bytes < %(small_below)s AND c.id <> %(job_id)s
              ORDER BY c.priority DESC, c.created_at
              LIMIT %(limit)s
              FOR UPDATE OF c SKIP LOCKED),
        %(worker)s, %(lease_s)s, 'validating')
)
SELECT true AS round_lead, * FROM lead
UNION ALL
SELECT false AS round_lead, * FROM companions
