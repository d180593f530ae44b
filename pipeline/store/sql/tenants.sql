-- Tenants (migration 0019): who shares the fleet, their limits, and their jobs in sums. The
-- claim (which tenant's job a worker takes next) is not here: it is the claim's own.

-- name: set_tenant
-- Made or changed: only the fields given change (their set_ flag true); NULL in a given limit
-- clears it. A tenant made here takes the defaults for the fields not given.
INSERT INTO tenants AS t (name, weight, max_running, max_queued)
VALUES (%(name)s, coalesce(%(weight)s::int, 1), %(max_running)s::int, %(max_queued)s::int)
ON CONFLICT (name) DO UPDATE
SET weight = CASE WHEN %(set_weight)s THEN excluded.weight ELSE t.weight END,
    max_running = CASE WHEN %(set_max_running)s THEN excluded.max_running ELSE t.max_running END,
    max_queued = CASE WHEN %(set_max_queued)s THEN excluded.max_queued ELSE t.max_queued END,
    updated_at = now()
RETURNING *

-- name: get_tenant
SELECT * FROM tenants WHERE name = %(name)s

-- name: list_tenants
SELECT * FROM tenants ORDER BY name

-- name: ensure_tenants
-- Made if missing (an API token's tenant at start); an existing one is left as it is.
INSERT INTO tenants (name) SELECT unnest(%(names)s::text[]) ORDER BY 1
ON CONFLICT (name) DO NOTHING

-- name: tenant_quota
-- A submission's chunk first reads its tenant's quota unlocked: a tenant without one (most, and
-- `default`) is never locked by submissions, so they do not queue up behind each other. No row:
-- no such tenant.
SELECT max_queued FROM tenants WHERE name = %(name)s

-- name: lock_tenant_quota
-- A tenant with a quota, in the transaction that inserts: its row locked (NO KEY: the jobs'
-- foreign key checks, FOR KEY SHARE, and the claim's lock of the same strength pass by; two
-- submissions of the tenant queue up here), then its queued jobs counted from its lanes in a
-- later statement, so the count is read after the lock, with what the submission before it
-- committed.
SELECT max_queued FROM tenants WHERE name = %(name)s FOR NO KEY UPDATE

-- name: tenant_queued
SELECT coalesce(sum(queued), 0)::bigint AS queued FROM tenant_lanes WHERE tenant = %(name)s

-- name: tenant_figures
-- Every tenant (or one) with its jobs now and over the window: the queued counts from the lanes
-- (a few rows a tenant), the running through jobs_tenant_running_idx, the finished through
-- jobs_finished_idx's range of the window.
WITH lanes AS (
    SELECT tenant, sum(queued)::bigint AS queued FROM tenant_lanes GROUP BY tenant
), running AS (
    SELECT tenant, count(*) AS running FROM jobs WHERE state = 'running' GROUP BY tenant
), finished AS (
    SELECT tenant,
           count(*) FILTER (WHERE state = 'succeeded') AS succeeded,
           count(*) FILTER (WHERE state = 'failed') AS failed,
           count(*) FILTER (WHERE state = 'cancelled') AS cancelled,
           count(*) FILTER (WHERE finished_at >= now() - interval '5 minutes') AS last_5m
    FROM jobs
    WHERE finished_at >= now() - make_interval(mins => %(window_minutes)s)
    GROUP BY tenant
)
SELECT t.*, coalesce(l.queued, 0) AS queued, coalesce(r.running, 0) AS running,
       coalesce(f.succeeded, 0) AS succeeded, coalesce(f.failed, 0) AS failed,
       coalesce(f.cancelled, 0) AS cancelled, coalesce(f.last_5m, 0) AS last_5m
FROM tenants t
LEFT JOIN lanes l ON l.tenant = t.name
LEFT JOIN running r ON r.tenant = t.name
LEFT JOIN finished f ON f.tenant = t.name
WHERE %(name)s::text IS NULL OR t.name = %(name)s::text
ORDER BY t.name

-- name: tenant_finished_since
-- How many of a tenant's jobs finished within the last %(window_s)s seconds: its rate of
-- leaving the queue, for a quota refusal's Retry-After.
SELECT count(*) AS finished FROM jobs
WHERE finished_at >= now() - make_interval(secs => %(window_s)s) AND tenant = %(name)s
