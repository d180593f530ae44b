-- Access (migration 0022): stored API tokens, the audit trail, submissions' Idempotency-Keys.

-- name: create_api_token
-- A new token: refused (no row) when the name is taken, by a live or a revoked token alike, so
-- a name in the audit trail always means one token.
INSERT INTO api_tokens (name, role, tenant, digest, created_by, expires_at)
VALUES (%(name)s, %(role)s, %(tenant)s, %(digest)s, %(created_by)s, %(expires_at)s)
ON CONFLICT DO NOTHING
RETURNING name, role, tenant, created_by, created_at, expires_at, last_used_at, revoked_at

-- name: find_api_token
-- The live token of this digest (not revoked, not expired), its last use noted when the one
-- noted is more than a minute old (one write a minute a token, not one a request).
WITH found AS (
    SELECT name, role, tenant, last_used_at FROM api_tokens
    WHERE digest = %(digest)s AND revoked_at IS NULL
      AND (expires_at IS NULL OR expires_at > now())
), touched AS (
    UPDATE api_tokens t SET last_used_at = now()
    FROM found f
    WHERE t.name = f.name
      AND (f.last_used_at IS NULL OR f.last_used_at < now() - interval '1 minute')
    RETURNING t.name
)
SELECT name, role, tenant FROM found

-- name: live_api_token
SELECT 1 FROM api_tokens
WHERE name = %(name)s AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > now())

-- name: list_api_tokens
SELECT name, role, tenant, created_by, created_at, expires_at, last_used_at, revoked_at
FROM api_tokens
WHERE %(all)s OR (revoked_at IS NULL AND (expires_at IS NULL OR expires_at > now()))
ORDER BY name

-- name: revoke_api_token
-- Revoked once: a second revoke finds no live token (no row).
UPDATE api_tokens SET revoked_at = now()
WHERE name = %(name)s AND revoked_at IS NULL
RETURNING name, role, tenant, created_by, created_at, expires_at, last_used_at, revoked_at

-- name: record_audit
INSERT INTO audit_log (actor, issuer, address, action, target, outcome, detail)
VALUES (%(actor)s, %(issuer)s, %(address)s, %(action)s, %(target)s, %(outcome)s, %(detail)s)

-- name: list_audit
-- Newest first (by id: the order entries were written), every filter optional; a page goes on
-- from the previous one's last id.
SELECT id, at, actor, issuer, address, action, target, outcome, detail FROM audit_log
WHERE (%(since)s::timestamptz IS NULL OR at >= %(since)s::timestamptz)
  AND (%(actor)s::text IS NULL OR actor = %(actor)s::text)
  AND (%(action)s::text IS NULL OR action = %(action)s::text)
  AND (%(before)s::bigint IS NULL OR id < %(before)s::bigint)
ORDER BY id DESC
LIMIT %(limit)s

-- name: allow_audit_prune
SELECT set_config('doclane.audit_prune', 'on', true)

-- name: prune_audit
-- The retention: entries older than it are deleted (the only delete the trail allows).
DELETE FROM audit_log WHERE at < now() - make_interval(secs => %(retention_s)s)

-- name: prune_idempotency_keys
DELETE FROM idempotency_keys WHERE created_at < now() - make_interval(secs => %(keep_s)s)

-- name: drop_stale_idempotency_key
-- A key older than the window is the caller's to use anew.
DELETE FROM idempotency_keys
WHERE caller = %(caller)s AND key = %(key)s
  AND created_at < now() - make_interval(secs => %(keep_s)s)

-- name: take_idempotency_key
-- The first submission with this key takes it (a row with no answer yet); no row: taken.
INSERT INTO idempotency_keys (caller, key, body) VALUES (%(caller)s, %(key)s, %(body)s)
ON CONFLICT (caller, key) DO NOTHING
RETURNING key

-- name: read_idempotency_key
SELECT body, answer, status FROM idempotency_keys WHERE caller = %(caller)s AND key = %(key)s

-- name: answer_idempotency_key
UPDATE idempotency_keys SET answer = %(answer)s, status = %(status)s
WHERE caller = %(caller)s AND key = %(key)s

-- name: release_idempotency_key
-- A submission that failed before answering gives its key back: the client's retry runs anew.
DELETE FROM idempotency_keys WHERE caller = %(caller)s AND key = %(key)s AND answer IS NULL
