-- Batches: a worker that claimed a small file job takes more due jobs that can share its call
-- to the server's directory tool. Each taken job gets its own claim (attempt, lease) from the
-- same function the queue's claim calls (claim_jobs).
-- A batch is one tenant's (the lead's, which the fair order chose): its companions are that
-- tenant's jobs, no more than its running cap leaves room for (its row locked, then counted:
-- exact under concurrent claimers, as the fair claim is, migration 0020), and its lanes' passes
-- advance by every job the batch took, so the tenant waits its turn for as many rotations.

-- name: batch_candidates
-- Never-tried queued file jobs of the same queue, profile, options and formats, small enough,
-- by priority then age; rows another worker is taking are skipped, not waited for. A job that
-- was tried before (attempt > 0) is never batched: a retry goes alone.
SELECT id, source_uri, size_bytes, content_sha256
FROM jobs
WHERE state = 'queued' AND attempt = 0 AND source_kind = 'file'
  AND queue = %(queue)s AND profile = %(profile)s AND options = %(options)s
  AND formats = %(formats)s::text[] AND size_bytes < %(small_below)s AND id <> %(lead)s
  AND tenant = %(tenant)s
ORDER BY priority DESC, created_at
LIMIT least(%(limit)s, coalesce(tenant_room(%(tenant)s, true), %(limit)s))
FOR UPDATE SKIP LOCKED

-- name: claim_batch_members
-- The chosen candidates, locked as queued above, claimed by the one claim (migration 0012) as
-- claim_job claims a job; the batch writes their stages itself.
SELECT * FROM claim_jobs(%(job_ids)s::uuid[], %(worker)s, %(lease_s)s, NULL)

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

-- name: advance_lanes
-- The passes of the lanes the batch's members came from, by a job each (migration 0020): the
-- fair order's account of what the tenant was given.
UPDATE tenant_lanes l
SET pass = l.pass + c.n::float8 / t.weight
FROM (SELECT queue, priority, tenant, count(*) AS n FROM jobs
      WHERE id = ANY(%(job_ids)s::uuid[]) GROUP BY queue, priority, tenant) c
JOIN tenants t ON t.name = c.tenant
WHERE l.queue = c.queue AND l.priority = c.priority AND l.tenant = c.tenant
