-- Batches: a worker that claimed a small file job takes more due jobs that can share its call
-- to the server's directory tool. Each taken job gets its own claim (attempt, lease) from the
-- one claim (migration 0026's claim_queue), which applies the batch's rules within the fair
-- order: the lead's tenant's jobs only, within its running cap (exact under concurrent
-- claimers), its lanes' passes advanced by every member.

-- name: claim_batch
-- Up to %(limit)s never-tried small file jobs like the lead (its queue, profile, options and
-- formats: a job tried before goes alone) that fit the batch's rules (%(batch)s), claimed with
-- SKIP LOCKED; the batch writes their stages itself.
SELECT (c.job).*
FROM claim_queue(%(queue)s, %(limit)s, %(worker)s, %(lease_s)s, NULL, %(small_below)s, true,
                 %(profile)s, %(options)s, %(formats)s::text[], %(batch)s) c
WHERE c.found = 'claimed'

-- name: release_job
-- running -> queued, the claim's attempt refunded: a batch member whose result could not be
-- proven goes back to be converted alone (attempt > 0 keeps it out of later batches).
UPDATE jobs
SET state = 'queued',
    attempts_spent = attempts_spent - 1,
    lease_owner = NULL,
    lease_expires_at = NULL,
    stage = NULL
WHERE id = %(job_id)s AND attempt = %(attempt)s AND state = 'running'
