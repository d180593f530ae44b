-- Rounds: a worker whose claim took a small job takes more jobs that can share its round (same
-- queue, profile, options and formats, small), converts them concurrently and stores their
-- results together. Each taken job gets its own claim (attempt, lease) from the one claim.

-- name: claim_round
-- Up to %(limit)s jobs like the round's (same queue, profile, options and formats; small,
-- never-tried file jobs: a job tried before goes alone, so a document that broke a round never
-- takes companions with it again), taken by the one claim (migration 0026: the fair rotation,
-- each tenant within its room, a lane whose oldest job is not like them passed over), with
-- SKIP LOCKED, claimed at once and started in the 'validating' stage as a lone claim starts.
SELECT (c.job).*
FROM claim_queue(%(queue)s, %(limit)s, %(worker)s, %(lease_s)s, 'validating', %(small_below)s,
                 true, %(profile)s, %(options)s, %(formats)s::text[]) c
WHERE c.found = 'claimed'
