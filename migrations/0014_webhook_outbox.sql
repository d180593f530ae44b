-- 0014: completion webhooks, written to an outbox by the transaction that makes a job final,
-- and the submission a job came in with.
--
-- A job may name a URL to be told when it ends (succeeded, failed, cancelled). Whoever makes it
-- final (a worker's success or failure, a cancel from the CLI or the API, the reconciler failing
-- a lost last attempt with E303, an operator in psql), the trigger below writes the event in the
-- same transaction: no code path can forget it, and no event exists for a state that was rolled
-- back. A job becomes final once, so it has at most one event for a receiver (UNIQUE job_id,
-- url): a receiver that is sent it twice gets the same event id twice, never two different
-- events. (A job has a second receiver when a later submission with another webhook was
-- deduplicated onto it: that receiver is told at submission, the job having ended already.)
--
-- Senders claim due rows with SKIP LOCKED and move their due time past the claim, so two senders
-- never send the same attempt at once; a sender that dies leaves a row that falls due again
-- when its claim lapses. `attempts` fences the sender's outcome like jobs.attempt fences a
-- worker's writes.

ALTER TABLE jobs
    ADD COLUMN webhook_url   text,
    ADD COLUMN submission_id uuid;

COMMENT ON COLUMN jobs.webhook_url IS
    'Where the job''s completion event is POSTed (Standard Webhooks); NULL: no event.';
COMMENT ON COLUMN jobs.submission_id IS
    'The submission (one `doclane submit`, one POST /v1/jobs) the job came in with.';

-- `doclane jobs --batch ID`, GET /v1/jobs?submission=ID: one submission's jobs, newest first.
CREATE INDEX jobs_submission_idx ON jobs (submission_id, created_at DESC)
    WHERE submission_id IS NOT NULL;

CREATE TABLE webhook_deliveries (
    -- The event's id: the `webhook-id` header, the receiver's idempotency key.
    id              uuid        PRIMARY KEY DEFAULT gen_random_uuid(),
    job_id          uuid        NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    -- Checked at submission, not here: a refusal here would refuse the job's final state.
    url             text        NOT NULL,
    event           jsonb       NOT NULL CHECK (jsonb_typeof(event) = 'object'),
    state           text        NOT NULL DEFAULT 'pending'
        CHECK (state IN ('pending', 'delivered', 'dead')),
    -- Sends so far, counting the one in flight: the fencing token of a sender's outcome.
    attempts        integer     NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    next_attempt_at timestamptz NOT NULL DEFAULT now(),
    -- When this run of tries began (an operator's re-send starts a new one): a delivery that
    -- has failed for longer than the give-up time is dead.
    tries_since     timestamptz NOT NULL DEFAULT now(),
    created_at      timestamptz NOT NULL DEFAULT now(),
    delivered_at    timestamptz,
    last_status     integer,
    last_error      text,
    CONSTRAINT webhook_deliveries_delivered_has_time
        CHECK (state <> 'delivered' OR delivered_at IS NOT NULL),
    CONSTRAINT webhook_deliveries_one_per_receiver UNIQUE (job_id, url)
);

-- Senders: the pending deliveries that are due.
CREATE INDEX webhook_deliveries_due_idx ON webhook_deliveries (next_attempt_at)
    WHERE state = 'pending';
-- `doclane webhooks --dead`: the dead ones, newest first.
CREATE INDEX webhook_deliveries_dead_idx ON webhook_deliveries (created_at DESC)
    WHERE state = 'dead';

-- The event's body, fixed when the job becomes final (the row never changes after that):
-- Standard Webhooks' shape, {type, timestamp, data}. The results are named by their path in the
-- API; the sender makes them URLs when it knows the API's public address.
CREATE FUNCTION webhook_event(j jobs) RETURNS jsonb LANGUAGE sql STABLE AS $$
    SELECT jsonb_build_object(
        'type', 'job.' || j.state,
        'timestamp', to_char(j.finished_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'),
        'data', jsonb_strip_nulls(jsonb_build_object(
            'job_id', j.id,
            'submission_id', j.submission_id,
            'state', j.state,
            'source', j.source_uri,
            'error', CASE WHEN j.error_code IS NOT NULL AND j.state = 'failed' THEN
                jsonb_build_object('code', j.error_code, 'message', j.error_message) END,
            'results', CASE WHEN j.state = 'succeeded' THEN (
                SELECT jsonb_agg(jsonb_build_object(
                    'format', f, 'path', '/v1/jobs/' || j.id || '/result/' || f) ORDER BY f)
                FROM unnest(j.formats) f) END,
            'attempts', j.attempt,
            'created_at', j.created_at,
            'started_at', j.started_at,
            'finished_at', j.finished_at,
            'duration_s', extract(epoch FROM j.finished_at - j.created_at)
        ))
    )
$$;

CREATE FUNCTION jobs_webhook_outbox() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO webhook_deliveries (job_id, url, event)
    VALUES (NEW.id, NEW.webhook_url, webhook_event(NEW))
    ON CONFLICT (job_id, url) DO NOTHING;
    RETURN NULL;
END;
$$;

-- A row trigger whose WHEN is evaluated without calling the function: a job without a webhook,
-- and every progress write, cost nothing more than that test.
CREATE TRIGGER jobs_webhook_outbox AFTER UPDATE OF state ON jobs
    FOR EACH ROW
    WHEN (NEW.webhook_url IS NOT NULL AND OLD.state IS DISTINCT FROM NEW.state
          AND NEW.state IN ('succeeded', 'failed', 'cancelled'))
    EXECUTE FUNCTION jobs_webhook_outbox();
