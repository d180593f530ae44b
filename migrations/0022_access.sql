-- Access for an organisation: API tokens kept here (only their SHA-256 digest, never the
-- secret), an audit trail of every action that changes something, and the keys that make a
-- submission safe to retry.
--
-- A token is looked up by its digest on every request that no environment token matched, so a
-- revocation (revoked_at set) is refused by every API process at its next request, no restart.
-- last_used_at is written at most once a minute a token (the look-up's own statement), so a busy
-- client does not turn every read into a write.

CREATE TABLE api_tokens (
    name         text PRIMARY KEY CHECK (name ~ '^[A-Za-z0-9_.@-]{1,64}$'),
    role         text NOT NULL CHECK (role IN ('read', 'submit', 'admin')),
    tenant       text REFERENCES tenants (name),
    digest       bytea NOT NULL UNIQUE CHECK (length(digest) = 32),
    created_by   text NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    expires_at   timestamptz,
    last_used_at timestamptz,
    revoked_at   timestamptz
);

COMMENT ON TABLE api_tokens IS
    'API tokens made by doclane tokens create or POST /v1/tokens: the SHA-256 digest of each '
    'secret (never the secret), its role, tenant, expiry and revocation.';

-- Who did what, when, from where, and how it ended. Append-only, as job_events is, except for
-- the retention's own delete (prune_audit, a statement of the store's), which states itself
-- through the transaction-local setting doclane.audit_prune.
CREATE TABLE audit_log (
    id       bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at       timestamptz NOT NULL DEFAULT now(),
    actor    text NOT NULL,
    issuer   text,
    address  text,
    action   text NOT NULL,
    target   text,
    outcome  text NOT NULL,
    detail   jsonb NOT NULL DEFAULT '{}'::jsonb
);

COMMENT ON TABLE audit_log IS
    'Every action that changed something (or tried to): who, when, from where, what, the outcome.';

CREATE INDEX audit_log_at_idx ON audit_log (at);
CREATE INDEX audit_log_actor_idx ON audit_log (actor, id DESC);

CREATE FUNCTION audit_log_refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' AND current_setting('doclane.audit_prune', true) = 'on' THEN
        RETURN OLD;
    END IF;
    RAISE EXCEPTION 'audit_log is append-only (% refused)', TG_OP
        USING ERRCODE = 'check_violation';
END;
$$;

CREATE TRIGGER audit_log_append_only BEFORE UPDATE OR DELETE ON audit_log
    FOR EACH ROW EXECUTE FUNCTION audit_log_refuse_change();

-- A submission's Idempotency-Key: the caller, the key, the digest of the body it came with and,
-- once the submission is done, its answer. Kept a day (pruned with the audit trail).
CREATE TABLE idempotency_keys (
    caller     text NOT NULL,
    key        text NOT NULL CHECK (length(key) BETWEEN 1 AND 255),
    body       bytea NOT NULL,
    answer     jsonb,
    status     integer,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (caller, key)
);

CREATE INDEX idempotency_keys_created_idx ON idempotency_keys (created_at);

COMMENT ON TABLE idempotency_keys IS
    'Idempotency-Key of POST /v1/jobs: the same key from the same caller within a day answers '
    'the first submission again.';
