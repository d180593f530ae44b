-- The completion webhooks' outbox (migration 0014): the trigger on jobs writes a delivery when a
-- job with a webhook becomes final; senders take due deliveries one at a time and report back.
-- Every report is fenced by (id, attempts, state = 'pending'): a sender whose claim lapsed and
-- was taken over writes nothing.

-- name: claim_delivery
-- One due delivery, skipping those another sender holds; its due time moves past the claim, so
-- nobody else sends this attempt unless the claim lapses (its sender died).
UPDATE webhook_deliveries d
SET attempts = d.attempts + 1,
    next_attempt_at = now() + make_interval(secs => %(claim_s)s)
FROM (
    SELECT id FROM webhook_deliveries
    WHERE state = 'pending' AND next_attempt_at <= now()
    ORDER BY next_attempt_at
    LIMIT 1
    FOR UPDATE SKIP LOCKED
) due
WHERE d.id = due.id
RETURNING d.id, d.job_id, d.url, d.event, d.attempts, d.tries_since

-- name: tell_finished
-- A submission deduplicated onto jobs that have ended: its receiver gets the event their end
-- made (one per job and receiver; the event names the job's own submission).
INSERT INTO webhook_deliveries (job_id, url, event)
SELECT j.id, %(url)s, webhook_event(j)
FROM jobs j
WHERE j.id = ANY(%(job_ids)s::uuid[]) AND j.state IN ('succeeded', 'failed', 'cancelled')
ON CONFLICT (job_id, url) DO NOTHING

-- name: mark_delivered
UPDATE webhook_deliveries
SET state = 'delivered', delivered_at = now(), last_status = %(status)s, last_error = NULL
WHERE id = %(id)s AND attempts = %(attempts)s AND state = 'pending'

-- name: schedule_redelivery
-- A failed try: due again after the delay, or dead once its tries have run past the give-up
-- time (%(dead)s: dead now, whatever the time, for what no retry can mend).
UPDATE webhook_deliveries
SET state = CASE WHEN %(dead)s
                   OR now() + make_interval(secs => %(delay_s)s)
                      > tries_since + make_interval(secs => %(give_up_s)s)
                 THEN 'dead' ELSE 'pending' END,
    next_attempt_at = now() + make_interval(secs => %(delay_s)s),
    last_status = %(status)s,
    last_error = %(error)s
WHERE id = %(id)s AND attempts = %(attempts)s AND state = 'pending'
RETURNING state

-- name: delivery_counts
-- Pending (never tried, or being sent), failed (tried and failed, still pending: retried) and
-- dead: each
-- read through a partial index, cheap however many were delivered.
SELECT (SELECT count(*) FROM webhook_deliveries
        WHERE state = 'pending' AND last_error IS NULL) AS pending,
       (SELECT count(*) FROM webhook_deliveries
        WHERE state = 'pending' AND last_error IS NOT NULL) AS failed,
       (SELECT count(*) FROM webhook_deliveries WHERE state = 'dead') AS dead

-- name: list_deliveries
-- Pending (and failed) or dead deliveries, newest first.
SELECT id, job_id, url, state, attempts, next_attempt_at, tries_since, created_at,
       delivered_at, last_status, last_error
FROM webhook_deliveries
WHERE state = %(state)s
ORDER BY created_at DESC
LIMIT %(limit)s

-- name: revive_deliveries
-- An operator's re-send: dead (or failed) deliveries due now, with a new run of tries.
UPDATE webhook_deliveries
SET state = 'pending', next_attempt_at = now(), tries_since = now()
WHERE state = %(state)s AND (%(state)s = 'dead' OR last_error IS NOT NULL)
  AND (%(ids)s::uuid[] IS NULL OR id = ANY(%(ids)s::uuid[]))
RETURNING id
