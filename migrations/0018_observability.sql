-- 0018: what operators watch a fleet through: one trace per job, and the reconciler's
-- republishing as a figure.
--
-- A job's trace context (W3C Trace Context: {"traceparent": ..., "tracestate": ...}), taken
-- where the job was submitted, is stored with the job, so whatever works on it later (its
-- message's worker, a retry, a message the reconciler republished, another worker after a
-- lease expired) continues the same trace. NULL when the submitter did not trace. A slice
-- (0017: split_job() creates it) carries its parent's: one trace for the whole document.

ALTER TABLE jobs ADD COLUMN trace_context jsonb
    CHECK (trace_context IS NULL OR jsonb_typeof(trace_context) = 'object');

CREATE FUNCTION inherit_trace_context() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    SELECT p.trace_context INTO NEW.trace_context FROM jobs p WHERE p.id = NEW.parent_id;
    RETURN NEW;
END
$$;

CREATE TRIGGER jobs_inherit_trace_context
    BEFORE INSERT ON jobs
    FOR EACH ROW
    WHEN (NEW.parent_id IS NOT NULL AND NEW.trace_context IS NULL)
    EXECUTE FUNCTION inherit_trace_context();

-- The reconciler notes every job whose message it presumes lost and republishes
-- (reconciler.sql: take_stale_waiting, take_lost_queued); counted like state changes, as
-- kind 'note', name 'republished', so /metrics has doclane_reconciler_republished_total from
-- the same rollup. Notes before this migration are not counted (a counter starts at zero).
CREATE OR REPLACE VIEW countable_events AS
SELECT at,
       kind,
       CASE WHEN kind = 'mcp_call' THEN tool
            WHEN kind = 'note' THEN 'republished'
            ELSE to_state END AS name,
       CASE WHEN kind = 'mcp_call' THEN outcome ELSE '' END AS outcome,
       CASE WHEN kind = 'mcp_call' THEN mcp_duration_bucket(duration_ms) ELSE 0 END AS bucket,
       coalesce(duration_ms, 0) AS duration_ms
FROM job_events
WHERE kind IN ('state_change', 'mcp_call')
   OR (kind = 'note' AND detail ->> 'reason' LIKE '%message presumed lost');
