-- 0007: rollups that keep `doclane stats` and `/metrics` cheap at a million jobs.
--
-- All-time questions ("how many jobs ever succeeded", "how many failed with E101", "how many MCP
-- calls did export make") would read the whole table on every call. They need not: a finished
-- job never changes again (0003), and job_events is append-only (0004). So whatever finished, or
-- was logged, before a mark can be counted once and kept; a reader adds the few rows after the
-- mark (an index range scan) to the kept sums. The mark trails the clock by a margin (see
-- pipeline/store/sql/admin.sql, roll_up_*) so that a transaction still open when the rollup runs,
-- whose rows carry its start time, is not missed.

CREATE TABLE finished_rollup (
    state      text   NOT NULL CHECK (state IN ('succeeded', 'failed', 'cancelled')),
    -- '' for a job without an error code (succeeded, most cancelled)
    error_code text   NOT NULL DEFAULT '',
    jobs       bigint NOT NULL CHECK (jobs >= 0),
    PRIMARY KEY (state, error_code)
);

CREATE TABLE event_rollup (
    kind            text   NOT NULL CHECK (kind IN ('state_change', 'mcp_call')),
    -- the tool of an MCP call, the state entered by a state change
    name            text   NOT NULL,
    -- an MCP call's outcome ('' for state changes)
    outcome         text   NOT NULL DEFAULT '',
    -- mcp_duration_bucket() of an MCP call (0 for state changes)
    bucket          integer NOT NULL DEFAULT 0,
    events          bigint NOT NULL CHECK (events >= 0),
    duration_ms_sum double precision NOT NULL DEFAULT 0,
    PRIMARY KEY (kind, name, outcome, bucket)
);

-- One row: everything finished (jobs.finished_at) or logged (job_events.at) before these times
-- is in the rollups above; readers count only what came after.
CREATE TABLE rollup_marks (
    one             boolean     PRIMARY KEY DEFAULT true CHECK (one),
    finished_before timestamptz NOT NULL,
    events_before   timestamptz NOT NULL
);

-- The MCP call latency histogram's bounds (milliseconds), fixed here because the rollup keeps
-- counts per bucket. width_bucket(): bucket i (1-based) holds calls of at least bound i and less
-- than bound i+1; the last bucket holds everything from the last bound up. Durations are >= 0,
-- so bucket 0 never occurs.
CREATE FUNCTION mcp_duration_bounds() RETURNS double precision[]
LANGUAGE sql IMMUTABLE AS $$
    SELECT '{0,25,50,100,250,500,1000,2500,5000,10000,30000,60000,120000,300000}'::float8[]
$$;

CREATE FUNCTION mcp_duration_bucket(duration_ms double precision) RETURNS integer
LANGUAGE sql IMMUTABLE AS $$
    SELECT width_bucket(coalesce(duration_ms, 0), mcp_duration_bounds())
$$;

-- The trail as event_rollup counts it: state changes by the state entered, MCP calls by tool,
-- outcome and latency bucket. A plain view: a filter on `at` still reaches job_events_at_brin.
CREATE VIEW countable_events AS
SELECT at,
       kind,
       CASE WHEN kind = 'mcp_call' THEN tool ELSE to_state END AS name,
       CASE WHEN kind = 'mcp_call' THEN outcome ELSE '' END AS outcome,
       CASE WHEN kind = 'mcp_call' THEN mcp_duration_bucket(duration_ms) ELSE 0 END AS bucket,
       coalesce(duration_ms, 0) AS duration_ms
FROM job_events
WHERE kind IN ('state_change', 'mcp_call');

-- Roll up what exists already, up to a quarter of an hour ago (later rows stay live).
INSERT INTO rollup_marks (finished_before, events_before)
VALUES (now() - interval '15 minutes', now() - interval '15 minutes');

INSERT INTO finished_rollup (state, error_code, jobs)
SELECT state, coalesce(error_code, ''), count(*)
FROM jobs
WHERE finished_at < (SELECT finished_before FROM rollup_marks)
GROUP BY 1, 2;

INSERT INTO event_rollup (kind, name, outcome, bucket, events, duration_ms_sum)
SELECT kind, name, outcome, bucket, count(*), sum(duration_ms)
FROM countable_events
WHERE at < (SELECT events_before FROM rollup_marks)
GROUP BY 1, 2, 3, 4;
