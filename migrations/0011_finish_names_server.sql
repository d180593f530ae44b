-- 0011: an attempt's successful end also records the server that converted it.
--
-- The server was recorded by the attempt's first stage write ("converting", with its origin).
-- A running attempt now holds its stage writes back for a moment (DOCLANE_PROGRESS_HOLD_S): a
-- document that converts in milliseconds costs a claim and this one statement, and its server
-- must then come with the results, so that the row and the "succeeded" event (migration 0004
-- copies the row's server_origin into it) still say where the job was converted.
--
-- A new parameter makes another function, so the old one is dropped; the new parameter has a
-- default, so a worker still running the previous code (six arguments) finishes its jobs through
-- the new function during a rolling upgrade.

DROP FUNCTION finish_attempt(uuid, integer, text[], text[], jsonb, jsonb);

CREATE FUNCTION finish_attempt(p_job_id uuid, p_attempt integer, p_formats text[],
                               p_contents text[], p_calls jsonb, p_note jsonb,
                               p_origin text DEFAULT NULL)
RETURNS text[] LANGUAGE plpgsql AS $$
DECLARE
    wanted text[];
BEGIN
    PERFORM insert_mcp_calls(p_job_id, p_attempt, p_calls);
    IF p_note IS NOT NULL THEN
        INSERT INTO job_events (job_id, attempt, kind, detail)
        VALUES (p_job_id, p_attempt, 'note', p_note);
    END IF;
    UPDATE jobs
       SET state = 'succeeded', stage = NULL, server_origin = coalesce(p_origin, server_origin),
           error_code = NULL, error_message = NULL, error_detail = NULL
     WHERE id = p_job_id AND attempt = p_attempt AND state = 'running'
    RETURNING formats INTO wanted;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    IF (SELECT array_agg(f ORDER BY f) FROM unnest(wanted) f)
       IS DISTINCT FROM (SELECT array_agg(DISTINCT f ORDER BY f) FROM unnest(p_formats) f)
       OR cardinality(p_formats) <> cardinality(p_contents) THEN
        RAISE EXCEPTION 'job % wants formats %, got results for %', p_job_id, wanted, p_formats
            USING ERRCODE = 'DL001';
    END IF;
    INSERT INTO results (job_id, format, attempt, content)
    SELECT p_job_id, r.format, p_attempt, r.content
    FROM unnest(p_formats, p_contents) AS r(format, content);
    RETURN wanted;
END;
$$;
