-- Rounds: a worker that claimed a small job takes up to N-1 more due jobs that can share its
-- round (same queue, profile, options and formats, small), converts them concurrently and
-- stores their results together. Each taken job gets its own claim (attempt, lease) from the
-- one claim function (migration 0012); its broker message later finds nothing to claim.

-- name: claim_round
-- Up to %(limit)s jobs like the round's (same queue, profile, options and formats; small,
-- never-tried file jobs: a job tried before goes alone, so a document that broke a round never
-- takes companions with it again), taken by the fair rotation (migration 0020: lane by lane,
-- each tenant within its room, a lane whose oldest job is not like them passed over), with
-- SKIP LOCKED, claimed at once and started in the 'validating' stage as a lone claim starts.
SELECT * FROM claim_fair(%(queue)s, %(limit)s, %(worker)s, %(lease_s)s, 'validating', false,
                         true, %(profile)s, %(options)s, %(formats)s::text[], %(small_below)s)
