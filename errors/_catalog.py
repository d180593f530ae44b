"""The error catalog: one row per code, the single source of truth for what a code means.

Every other part of doclane (the exception classes, the classifier, retry, the breaker, Celery,
the CLI's ``--json`` output, the job rows) reads the flags here instead of keeping its own list,
so a code cannot be retryable in one place and final in another.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType


@dataclass(frozen=True, slots=True)
class CatalogEntry:
    """What one code means, for the machine (flags) and for the person reading it (texts)."""

    code: str
    title: str
    user_message: str
    action: str
    retryable: bool
    #: Server-side trouble that should count towards opening a circuit breaker.
    trips_breaker: bool = False


_ENTRIES = (
    CatalogEntry(
        "E101",
        "source not found or unreadable",
        "The document could not be found or read.",
        "Check the path or URL and the worker's permission to read it.",
        retryable=False,
    ),
    CatalogEntry(
        "E102",
        "unsupported format",
        "This kind of document cannot be converted.",
        "Submit PDF, DOCX, XLSX, PPTX, HTML, Markdown, CSV or an image.",
        retryable=False,
    ),
    CatalogEntry(
        "E103",
        "source too large",
        "The document is larger than the configured maximum.",
        "Split the document or raise DOCLANE_MAX_SOURCE_BYTES.",
        retryable=False,
    ),
    CatalogEntry(
        "E104",
        "URL refused",
        "The URL's scheme or address is not allowed.",
        "Use http(s) to a public address, or allow private addresses explicitly.",
        retryable=False,
    ),
    CatalogEntry(
        "E105",
        "path outside the allowed roots",
        "The document lies outside the folders doclane may read.",
        "Move it under one of DOCLANE_ALLOWED_ROOTS or extend that setting.",
        retryable=False,
    ),
    CatalogEntry(
        "E106",
        "empty source",
        "The document is empty.",
        "Submit a document with content.",
        retryable=False,
    ),
    CatalogEntry(
        "E107",
        "source temporarily unavailable",
        "The document's server could not be reached right now.",
        "Retried automatically; check that the URL's server is up.",
        retryable=True,
    ),
    CatalogEntry(
        "E111",
        "object not found",
        "The object store has no such bucket or key.",
        "Check the s3:// address, and AWS_ENDPOINT_URL for an S3-compatible server.",
        retryable=False,
    ),
    CatalogEntry(
        "E112",
        "object store access denied",
        "The object store refused doclane's credentials for this bucket or key.",
        "Grant the key pair in AWS_ACCESS_KEY_ID read and list rights on the bucket.",
        retryable=False,
    ),
    CatalogEntry(
        "E113",
        "results expired",
        "The job succeeded, but its results are older than the retention and were deleted.",
        "Submit the document again (expired results are never reused), or raise "
        "DOCLANE_RESULT_RETENTION.",
        retryable=False,
    ),
    CatalogEntry(
        "E114",
        "too many failed sign-ins",
        "Too many sign-ins with a wrong token came from this address; the console refuses its "
        "sign-ins for a while.",
        "Wait until the time given has passed, then sign in with a valid API token "
        "(DOCLANE_CONSOLE_SIGNIN_FAILURES, DOCLANE_CONSOLE_SIGNIN_WINDOW_S set the limit).",
        retryable=False,
    ),
    CatalogEntry(
        "E115",
        "tenant queue full",
        "The tenant already has as many jobs waiting as its quota allows; this document was not "
        "queued.",
        "Submit it again once some of the tenant's jobs have started (the API's 429 says when in "
        "Retry-After), or ask an operator to raise the quota (doclane tenants set NAME "
        "--max-queued N).",
        retryable=True,
    ),
    CatalogEntry(
        "E116",
        "unknown tenant",
        "No tenant of this name exists; nothing was submitted.",
        "Check the name (doclane tenants list), or have an operator make it "
        "(doclane tenants set NAME).",
        retryable=False,
    ),
    CatalogEntry(
        "E117",
        "invalid argument",
        "A command's argument or option, or a request's field, is not valid; nothing was done.",
        "Fix it as the message says (`doclane COMMAND --help` lists a command's arguments).",
        retryable=False,
    ),
    CatalogEntry(
        "E118",
        "not possible in the job's state",
        "The job's state does not allow this: only a succeeded job has results, only a waiting "
        "or running job can be cancelled, a running job cannot be retried.",
        "Check the job's state (doclane status JOB); wait for it to finish, or retry a failed "
        "one (doclane retry JOB).",
        retryable=False,
    ),
    CatalogEntry(
        "E119",
        "nothing to convert",
        "The sources named no document doclane converts: their folders are empty, or hold only "
        "hidden files or files of other kinds; nothing was submitted.",
        "Name documents, or folders that hold them (PDF, DOCX, XLSX, PPTX, HTML, Markdown, CSV "
        "or images); the skipped counts say what was passed over.",
        retryable=False,
    ),
    CatalogEntry(
        "E120",
        "invalid setting",
        "A setting read from the environment (or .env) is not valid; the command did not start.",
        "Fix the variable the message names (docs/configuration.md says what each one takes).",
        retryable=False,
    ),
    CatalogEntry(
        "E121",
        "ambiguous short id",
        "More than one job (or submission) has an id that starts with these characters.",
        "Give more of the id, or all of it (doclane jobs --json and the API show ids in full).",
        retryable=False,
    ),
    CatalogEntry(
        "E122",
        "rate limit exceeded",
        "This caller sent more API requests than its rate allows; this one was not served.",
        "Wait the seconds of Retry-After and send it again, or ask an operator to raise the rate "
        "(DOCLANE_API_RATE_LIMIT, DOCLANE_API_RATE_LIMITS).",
        retryable=True,
    ),
    CatalogEntry(
        "E123",
        "idempotency key reused",
        "This Idempotency-Key came with another submission before; nothing was submitted.",
        "Send a new key for a new submission; the same key only to retry the same one.",
        retryable=False,
    ),
    CatalogEntry(
        "E124",
        "bearer token refused",
        "The bearer token is not one the API accepts: expired, not yet valid, from another issuer "
        "or for another audience, or its signature or key is not the issuer's.",
        "Get a new token from the identity provider; check DOCLANE_OIDC_ISSUER, "
        "DOCLANE_OIDC_AUDIENCE and the clocks.",
        retryable=False,
    ),
    CatalogEntry(
        "E200",
        "parse error",
        "The conversion server sent a reply that could not be understood.",
        "Check that the origin points at an MCP server; report the server's version.",
        retryable=False,
    ),
    CatalogEntry(
        "E201",
        "invalid request",
        "The conversion server rejected the request as invalid.",
        "Report this: the client and server disagree about the protocol.",
        retryable=False,
    ),
    CatalogEntry(
        "E202",
        "method not found",
        "The conversion server does not support the requested method.",
        "Check the server's version and MCP protocol support.",
        retryable=False,
    ),
    CatalogEntry(
        "E203",
        "invalid params",
        "The arguments do not match what the tool accepts.",
        "Fix the arguments to match the tool's input schema (`doclane mcp tools`).",
        retryable=False,
    ),
    CatalogEntry(
        "E204",
        "internal error",
        "The conversion server hit an internal error.",
        "Retried automatically; if it persists, read the server's log.",
        retryable=True,
        trips_breaker=True,
    ),
    CatalogEntry(
        "E299",
        "unknown JSON-RPC error",
        "The conversion server answered with an error doclane does not know.",
        "Read the kept JSON-RPC code and message and the server's log.",
        retryable=False,
    ),
    CatalogEntry(
        "E301",
        "not initialized",
        "The MCP session was used before it was initialized.",
        "Report this: doclane called a tool before the handshake finished.",
        retryable=False,
    ),
    CatalogEntry(
        "E302",
        "server unavailable",
        "The conversion server could not be reached or is overloaded.",
        "Retried automatically; check that the server is running and reachable.",
        retryable=True,
        trips_breaker=True,
    ),
    CatalogEntry(
        "E303",
        "timeout",
        "The conversion server did not answer in time.",
        "Retried automatically; large documents get longer timeouts (DOCLANE_TIMEOUT_*).",
        retryable=True,
        trips_breaker=True,
    ),
    CatalogEntry(
        "E304",
        "unknown tool",
        "The conversion server does not offer the requested tool.",
        "Check `doclane mcp tools` and the server's enabled tool groups.",
        retryable=False,
    ),
    CatalogEntry(
        "E305",
        "missing capability",
        "The conversion server lacks a capability doclane needs (at submission: no configured "
        "server can give the formats or take the options asked for).",
        "Use a server that offers tools over a supported MCP protocol version; ask only for what "
        "a configured server gives (`doclane mcp tools`; options need docling-rs-mcp).",
        retryable=False,
    ),
    CatalogEntry(
        "E306",
        "conversion failed",
        "The conversion server could not convert the document.",
        "Check that the document opens; the server's log has the cause.",
        retryable=False,
    ),
    CatalogEntry(
        "E307",
        "export failed",
        "The converted document could not be exported.",
        "Read the server's log; resubmit the job.",
        retryable=False,
    ),
    CatalogEntry(
        "E308",
        "session expired",
        "The conversion server forgot the session and it could not be re-established.",
        "Retried automatically; the server probably restarted.",
        retryable=True,
        trips_breaker=True,
    ),
    CatalogEntry(
        "E309",
        "circuit open",
        "Calls to this conversion server are paused after repeated failures.",
        "Wait for the breaker to reset; check the server's health.",
        retryable=True,
    ),
    CatalogEntry(
        "E310",
        "unauthorized",
        "The conversion server refused doclane's credentials.",
        "Set DOCLING_MCP_AUTH and its token, key or OAuth client; with OAuth, check that the "
        "authorization server issues tokens this server accepts.",
        retryable=False,
    ),
    CatalogEntry(
        "E311",
        "output does not match schema",
        "The conversion server's answer did not match the tool's declared output.",
        "Report this with the server's version.",
        retryable=False,
    ),
    CatalogEntry(
        "E312",
        "reply larger than the limit",
        "The conversion server's reply was larger than doclane accepts.",
        "Raise DOCLANE_MCP_MAX_REPLY_BYTES if such outputs are expected, or split the document.",
        retryable=False,
    ),
    CatalogEntry(
        "E313",
        "authorization failed",
        "doclane could not obtain an access token for the conversion server.",
        "Check DOCLING_MCP_CLIENT_ID and its secret or key with the authorization server, and "
        "that the server publishes its protected resource and authorization server metadata.",
        retryable=False,
    ),
    CatalogEntry(
        "E314",
        "authorization server unavailable",
        "The authorization server that issues tokens could not be reached or failed.",
        "Retried automatically; check the authorization server the MCP server names.",
        retryable=True,
    ),
    CatalogEntry(
        "E315",
        "document outside the server's reach",
        "The conversion server cannot read the document doclane gave it: it is outside the "
        "server's roots, or not at that path on the server.",
        "Start the server with roots holding doclane's inbox (DOCLANE_INBOX_DIR, where uploads "
        "and downloads land) and every folder documents are submitted from (docling-rs-mcp "
        "--root DIR), or share the folders with the server and set DOCLANE_PATH_MAP.",
        retryable=False,
    ),
    CatalogEntry(
        "E399",
        "unexpected error",
        "doclane hit an error it does not know how to classify.",
        "Report this with the log; it is a bug in doclane.",
        retryable=False,
    ),
    CatalogEntry(
        "E401",
        "database unavailable",
        "The job database could not be reached.",
        "Retried automatically; check PostgreSQL and DOCLANE_DATABASE_URL.",
        retryable=True,
    ),
    CatalogEntry(
        "E403",
        "migration refused",
        "The database's schema could not be migrated: a migration file is missing, misnamed or "
        "changed since it was applied, or it failed.",
        "Restore a changed file as released (an applied migration is never edited: add a new "
        "one), check DOCLANE_MIGRATIONS_DIR, or fix what the failure names; then run "
        "doclane db migrate again.",
        retryable=False,
    ),
    CatalogEntry(
        "E108",
        "job not found",
        "No job has this id.",
        "Check the id (doclane jobs, or GET /v1/jobs, lists them).",
        retryable=False,
    ),
    CatalogEntry(
        "E109",
        "not allowed for this token's role",
        "The API token is valid but its role does not allow this request.",
        "Use a token whose role allows it (DOCLANE_API_TOKENS: read, submit, admin).",
        retryable=False,
    ),
    CatalogEntry(
        "E110",
        "invalid conversion option",
        "A conversion option of the job is not valid.",
        "Fix the option (a page range such as 1-5 or 3; a password's environment variable "
        "name, set on the workers).",
        retryable=False,
    ),
    CatalogEntry(
        "E402",
        "result store unavailable",
        "The object store that keeps results could not be reached or failed.",
        "Retried automatically; check DOCLANE_RESULT_STORE, AWS_ENDPOINT_URL and the credentials.",
        retryable=True,
    ),
)

#: Code -> entry. Read-only so nothing can change a flag at run time.
CATALOG: MappingProxyType[str, CatalogEntry] = MappingProxyType({e.code: e for e in _ENTRIES})

#: JSON-RPC error code -> catalog code. Codes not listed become E299 (the wire code is kept).
JSONRPC_CODES: MappingProxyType[int, str] = MappingProxyType(
    {
        -32700: "E200",
        -32600: "E201",
        -32601: "E202",
        -32602: "E203",
        -32603: "E204",
        -32000: "E302",
        -32001: "E303",
        -32002: "E306",
        -32003: "E307",
        # 2026-07-28: the server does not speak the protocol version the request asked for.
        -32022: "E305",
    }
)


def entry(code: str) -> CatalogEntry:
    """The catalog row for ``code``; a KeyError here is a programming error."""
    return CATALOG[code]
