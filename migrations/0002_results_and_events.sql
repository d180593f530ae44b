-- 0002: results (one row per job and format) and job_events (the append-only audit trail).

-- A result can be tens of megabytes of markdown. lz4 compresses it many times faster than
-- the default pglz, which matters when a worker stores a 50 MB document inside its finishing
-- transaction.
CREATE TABLE results (
    job_id     uuid        NOT NULL REFERENCES jobs (id),
    format     text        NOT NULL CHECK (format <> ''),
    attempt    integer     NOT NULL CHECK (attempt > 0),
    content    text        COMPRESSION lz4 NOT NULL,
    size_bytes bigint      GENERATED ALWAYS AS (octet_length(content)) STORED,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (job_id, format)
);

COMMENT ON COLUMN results.attempt IS 'The attempt that produced this result (the one that succeeded).';

CREATE TABLE job_events (
    id            bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    job_id        uuid        NOT NULL REFERENCES jobs (id),
    attempt       integer     NOT NULL CHECK (attempt >= 0),
    kind          text        NOT NULL CHECK (kind IN ('state_change', 'mcp_call', 'note')),
    from_state    text,
    to_state      text,
    tool          text,
    duration_ms   double precision CHECK (duration_ms >= 0),
    outcome       text,
    error_code    text        CHECK (error_code ~ '^E[0-9]{3}$'),
    server_origin text,
    detail        jsonb,
    at            timestamptz NOT NULL DEFAULT clock_timestamp(),
    CONSTRAINT job_events_state_change_has_target CHECK (kind <> 'state_change' OR to_state IS NOT NULL),
    CONSTRAINT job_events_mcp_call_has_tool CHECK (kind <> 'mcp_call' OR (tool IS NOT NULL AND outcome IS NOT NULL))
);

-- One job's history, in order.
CREATE INDEX job_events_job_idx ON job_events (job_id, id);
-- Time-window questions over the whole trail (MCP calls and failures in the last hour). The
-- table is append-only and `at` grows with it, which is what BRIN is for: tiny and cheap to keep.
CREATE INDEX job_events_at_brin ON job_events USING brin (at);
