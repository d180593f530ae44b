-- 0004: every change of a job's state appends a job_events row, whoever makes it (the store, the
-- reconciler, an operator in psql), and the trail is append-only.
--
-- The writer may say why through the transaction-local setting doclane.reason
-- (SELECT set_config('doclane.reason', 'lease expired', true)); it lands in detail.reason.
-- An event carries the job's error code and message only when the error is why it moved (to
-- failed or retrying); the job row keeps its last error across a reclaim, the trail does not
-- repeat it. Statement-level triggers with transition tables write the events of a bulk insert
-- or a reconciler sweep in one INSERT ... SELECT.

CREATE FUNCTION jobs_state_event_detail(j jobs, previous_lease_owner text) RETURNS jsonb
LANGUAGE sql STABLE AS $$
    SELECT jsonb_strip_nulls(jsonb_build_object(
        'reason', nullif(current_setting('doclane.reason', true), ''),
        'worker', coalesce(j.lease_owner, previous_lease_owner),
        'error_message', CASE WHEN j.state IN ('failed', 'retrying') THEN j.error_message END,
        'next_attempt_at', j.next_attempt_at,
        'attempts_spent', j.attempts_spent,
        'max_attempts', j.max_attempts
    ))
$$;

CREATE FUNCTION jobs_log_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO job_events (job_id, attempt, kind, from_state, to_state, detail)
    SELECT n.id, n.attempt, 'state_change', NULL, n.state,
           jsonb_build_object('queue', n.queue, 'source', n.source_uri)
    FROM new_jobs n;
    RETURN NULL;
END;
$$;

CREATE FUNCTION jobs_log_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO job_events (job_id, attempt, kind, from_state, to_state, error_code,
                            server_origin, detail)
    SELECT n.id, n.attempt, 'state_change', o.state, n.state,
           CASE WHEN n.state IN ('failed', 'retrying') THEN n.error_code END, n.server_origin,
           jobs_state_event_detail(n, o.lease_owner)
    FROM new_jobs n JOIN old_jobs o ON o.id = n.id
    WHERE o.state <> n.state;
    RETURN NULL;
END;
$$;

CREATE TRIGGER jobs_log_insert AFTER INSERT ON jobs
    REFERENCING NEW TABLE AS new_jobs
    FOR EACH STATEMENT EXECUTE FUNCTION jobs_log_insert();
CREATE TRIGGER jobs_log_update AFTER UPDATE ON jobs
    REFERENCING OLD TABLE AS old_jobs NEW TABLE AS new_jobs
    FOR EACH STATEMENT EXECUTE FUNCTION jobs_log_update();

CREATE FUNCTION job_events_refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'job_events is append-only (% refused)', TG_OP
        USING ERRCODE = 'check_violation';
END;
$$;

CREATE TRIGGER job_events_append_only BEFORE UPDATE OR DELETE ON job_events
    FOR EACH ROW EXECUTE FUNCTION job_events_refuse_change();
CREATE TRIGGER job_events_no_truncate BEFORE TRUNCATE ON job_events
    FOR EACH STATEMENT EXECUTE FUNCTION job_events_refuse_change();
