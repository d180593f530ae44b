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
