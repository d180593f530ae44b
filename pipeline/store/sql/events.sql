-- The audit trail. State changes are logged by the database itself (0004); what only the worker
-- knows (its MCP calls, notes) is appended here.

-- name: insert_mcp_call
INSERT INTO job_events (job_id, attempt, kind, tool, duration_ms, outcome, error_code,
                        server_origin, detail)
VALUES (%(job_id)s, %(attempt)s, 'mcp_call', %(tool)s, %(duration_ms)s, %(outcome)s,
        %(error_code)s, %(origin)s, %(detail)s)

-- name: insert_note
INSERT INTO job_events (job_id, attempt, kind, detail)
VALUES (%(job_id)s, %(attempt)s, 'note', %(detail)s)

-- name: job_events
SELECT * FROM job_events WHERE job_id = %(job_id)s ORDER BY id
