-- The audit trail. State changes are logged by the database itself (0004); what only the worker
-- knows (its MCP calls, notes) is appended here.

-- name: insert_mcp_calls
-- The calls, in order, from one JSON array (migration 0009).
SELECT insert_mcp_calls(%(job_id)s, %(attempt)s, %(calls)s)

-- name: insert_note
INSERT INTO job_events (job_id, attempt, kind, detail)
VALUES (%(job_id)s, %(attempt)s, 'note', %(detail)s)

-- name: job_events
SELECT * FROM job_events WHERE job_id = %(job_id)s ORDER BY id
