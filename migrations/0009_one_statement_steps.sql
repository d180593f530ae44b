-- 0009: a running attempt's progress and its successful end, each one statement.
--
-- A job's progress write was a pipelined transaction (BEGIN, SET LOCAL, the trail's calls, the
-- stage, COMMIT) and its end another (the calls, a note, the state, the results by COPY): for a
-- document that converts in milliseconds, the driver's work per statement cost more than the
-- conversion (issue 15: psycopg was 31% of a worker's CPU per job). Each is now one call of a
-- function, one round trip and one statement for the driver. Large results still go by COPY
-- (pipeline/store/store.py): a text parameter would hold the whole document in memory twice.

-- The trail's MCP calls, in the order given: [{tool, duration_ms, outcome, error_code, origin,
-- detail}, ...]. A loop, so that the trail's ids follow the calls' order.
CREATE FUNCTION insert_mcp_calls(p_job_id uuid, p_attempt integer, p_calls jsonb)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    c jsonb;
BEGIN
    FOR c IN SELECT value FROM jsonb_array_elements(coalesce(p_calls, '[]'::jsonb)) LOOP
        INSERT INTO job_events (job_id, attempt, kind, tool, duration_ms, outcome, error_code,
                                server_origin, detail)
        VALUES (p_job_id, p_attempt, 'mcp_call', c->>'tool', (c->>'duration_ms')::float8,
                c->>'outcome', c->>'error_code', c->>'origin', nullif(c->'detail', 'null'));
    END LOOP;
END;
$$;

-- A running attempt's stage (and the server it talks to), with the calls made since its last
-- write. A progress report: committed without waiting for the WAL flush, as the store's other
-- progress writes are (a crash may lose its last fraction of a second; the claim and the
-- results, committed synchronously, flush it with them). The calls are kept even for an
-- attempt that lost its job: they happened. True when the attempt still owns the job.
CREATE FUNCTION record_progress(p_job_id uuid, p_attempt integer, p_stage text,
                                p_origin text, p_calls jsonb)
RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    PERFORM set_config('synchronous_commit', 'off', true);
    PERFORM insert_mcp_calls(p_job_id, p_attempt, p_calls);
    UPDATE jobs
       SET stage = p_stage, server_origin = coalesce(p_origin, server_origin)
     WHERE id = p_job_id AND attempt = p_attempt AND state = 'running';
    RETURN FOUND;
END;
$$;

-- running -> succeeded with the results of every format the job asked for, the calls not yet
-- in the trail and a note on how it was converted, at once. NULL (the calls and the note kept,
-- nothing else written) when the attempt no longer owns the job. Results that are not exactly
-- the job's formats undo everything (SQLSTATE DL001): a bug, never a partial success.
CREATE FUNCTION finish_attempt(p_job_id uuid, p_attempt integer, p_formats text[],
                               p_contents text[], p_calls jsonb, p_note jsonb)
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
       SET state = 'succeeded', stage = NULL,
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
