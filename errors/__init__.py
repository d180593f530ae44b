"""doclane's errors: one catalog, one class tree, one classification function.

Every error doclane raises on purpose about a document, a call or a request to doclane is a
:class:`PipelineError` with a catalog ``code`` (E1xx input, E2xx JSON-RPC protocol, E3xx MCP
runtime, E4xx store) and the catalog's
``message``/``user_message``/``action``/``retryable``. The tree::

    PipelineError
    ├── InputError             E1xx  a document or a request, checked before any server call
    │   ├── SourceNotFound        E101
    │   ├── UnsupportedFormat     E102
    │   ├── SourceTooLarge        E103
    │   ├── UrlRefused            E104
    │   ├── PathOutsideRoots      E105
    │   ├── EmptySource           E106
    │   ├── SourceUnavailable     E107  the source's server failed for now    retryable
    │   ├── JobNotFound           E108  no job has this id (API 404)
    │   ├── RoleForbidden         E109  the API token's role does not allow it (API 403)
    │   ├── InvalidOption         E110  a conversion option (page range, password variable)
    │   ├── ObjectNotFound        E111  s3://: no such bucket or key
    │   ├── ObjectAccessDenied    E112  s3://: the credentials are refused
    │   ├── ResultsExpired        E113  the results were deleted by retention
    │   ├── SignInThrottled       E114  console: too many failed sign-ins (429)
    │   ├── TenantQueueFull       E115  past the tenant's max_queued (API 429)   retryable
    │   ├── UnknownTenant         E116  no tenant of this name
    │   ├── InvalidArgument       E117  a command's argument or a request's field
    │   ├── JobStateForbids       E118  the job's state does not allow it
    │   ├── NothingToConvert      E119  the sources named no document to convert
    │   ├── InvalidSetting        E120  a variable of the environment is not valid
    │   ├── AmbiguousId           E121  a short id that more than one job (or submission) has
    │   ├── RateLimited           E122  past the caller's API rate (429)
    │   ├── IdempotencyKeyReused  E123  an Idempotency-Key sent with another body
    │   └── BearerTokenRefused    E124  a bearer JWT refused (401)
    ├── ProtocolError          E2xx  JSON-RPC said no (wire code kept)
    │   ├── ParseError            E200  -32700, bad JSON, bad SSE
    │   ├── InvalidRequest        E201  -32600
    │   ├── MethodNotFound        E202  -32601
    │   ├── InvalidParams         E203  -32602, or our own inputSchema check
    │   ├── InternalError         E204  -32603                      retryable, trips breaker
    │   └── UnknownJsonRpcError   E299  any other JSON-RPC code
    ├── McpRuntimeError        E3xx  the MCP conversation failed
    │   ├── NotInitialized        E301
    │   ├── ServerUnavailable     E302  connect errors, HTTP 5xx/429, -32000   retryable, trips
    │   ├── CallTimeout           E303  deadline, -32001                       retryable, trips
    │   ├── UnknownTool           E304
    │   ├── MissingCapability     E305
    │   ├── ConversionFailed      E306  isError on convert, -32002
    │   ├── ExportFailed          E307  isError on export, -32003
    │   ├── SessionExpired        E308  HTTP 404 and re-initialize failed      retryable, trips
    │   ├── CircuitOpen           E309  breaker open (retry after its reset)  retryable
    │   ├── Unauthorized          E310  HTTP 401/403
    │   ├── OutputSchemaMismatch  E311
    │   ├── ReplyTooLarge         E312  reply over DOCLANE_MCP_MAX_REPLY_BYTES
    │   ├── AuthorizationFailed   E313  OAuth: no token (discovery, client refused)
    │   ├── AuthorizationUnavailable E314  OAuth: the token issuer failed     retryable
    │   ├── ServerCannotReach     E315  the server cannot read the document (its roots)
    │   └── UnexpectedError       E399  what nothing else explains (a bug)
    ├── StoreError             E4xx
    │   ├── DatabaseUnavailable   E401                                         retryable
    │   ├── ResultStoreUnavailable E402 the object store of results failed    retryable
    │   └── MigrationRefused      E403  a migration file missing, changed, or failing
    └── ControlFlow            no code: signals that unwind work, never recorded; never
        │                      retried, never counted by a breaker (not failures, not bugs)
        ├── CallCancelled         the caller withdrew the call (its job was cancelled)
        ├── AttemptLost           pipeline.processing: the attempt no longer owns its job
        │                         (cancelled, requeued): stop, write nothing
        └── NotBatchable          pipeline.processing: no batch on these servers; each
                                  document goes alone

``classify(anything)`` turns an exception, a JSON-RPC error object, an HTTP status or an
``isError`` tool result into one of these. Foreign exceptions (httpx, psycopg) are translated
where they are caught, with ``raise ... from exc``; this package imports nothing but the stdlib.

Beside the tree, the exceptions doclane's packages raise about something other than a
document: an admin's request, the operator's configuration, a bug, a dependency the
admin views read. They carry no catalog code; each extends the builtin its callers catch
(``except ValueError`` keeps working) and lives beside the code that raises it::

    ValueError
    ├── WrongState             pipeline.admin       the job's state does not allow it (API 409)
    ├── BadUpload              pipeline.api         not the multipart form the endpoint takes
    ├── BadFilter              pipeline.console     a job list filter it cannot apply (shown)
    ├── PathMapError           pipeline.sources     DOCLANE_PATH_MAP is malformed (at start-up)
    ├── ResultFormatsRefused   pipeline.store       the database refused results that are not the
    │                                               job's formats (SQLSTATE DL001: a bug)
    ├── TokenNameTaken         pipeline.store       a stored API token of that name exists (409)
    └── ContentNotItsFormat    pipeline.sources     the bytes are not their format (made E102)
    RuntimeError
    ├── IllegalTransition      pipeline.mcp         a bug: a lifecycle step that does not exist
    ├── MigrationError         pipeline.store       migrations on disk and in the database differ
    └── CopyFormatError        pipeline.store       a COPY stream that is not one-column binary
    PermissionError
    ├── SignInRequired         pipeline.console     no valid session cookie (to the sign-in form)
    └── CsrfRefused            pipeline.console     a change without its session's CSRF token (403)
    ConnectionError
    └── BrokerUnreachable      workers.fleet        the broker did not answer about a queue
    Exception
    ├── RedisUnavailable       pipeline.resilience  Redis did not answer, or none is configured
    │                                               (not a RedisError, which pybreaker would
    │                                               swallow); the admin views say which Redis
    ├── KeyVanished            pipeline.profiles    the server lost a document key (convert again)
    └── TooLarge               pipeline.objects     an object's body passed the cap (made E103)

``tests/unit/errors/test_tree_drawing.py`` fails when a class is in neither drawing.
"""

from __future__ import annotations

from errors._catalog import CATALOG, JSONRPC_CODES, CatalogEntry, entry
from errors._classify import Stage, classify, classify_jsonrpc
from errors._tree import (
    ERROR_CLASSES,
    AmbiguousId,
    AuthorizationFailed,
    AuthorizationUnavailable,
    BearerTokenRefused,
    CallCancelled,
    CallTimeout,
    CircuitOpen,
    ControlFlow,
    ConversionFailed,
    DatabaseUnavailable,
    EmptySource,
    ExportFailed,
    IdempotencyKeyReused,
    InputError,
    InternalError,
    InvalidArgument,
    InvalidOption,
    InvalidParams,
    InvalidRequest,
    InvalidSetting,
    JobNotFound,
    JobStateForbids,
    McpRuntimeError,
    MethodNotFound,
    MigrationRefused,
    MissingCapability,
    NothingToConvert,
    NotInitialized,
    ObjectAccessDenied,
    ObjectNotFound,
    OutputSchemaMismatch,
    ParseError,
    PathOutsideRoots,
    PipelineError,
    ProtocolError,
    RateLimited,
    ReplyTooLarge,
    ResultsExpired,
    ResultStoreUnavailable,
    RoleForbidden,
    ServerCannotReach,
    ServerUnavailable,
    SessionExpired,
    SignInThrottled,
    SourceNotFound,
    SourceTooLarge,
    SourceUnavailable,
    StoreError,
    TenantQueueFull,
    Unauthorized,
    UnexpectedError,
    UnknownJsonRpcError,
    UnknownTenant,
    UnknownTool,
    UnsupportedFormat,
    UrlRefused,
    error_for,
)

__all__ = [
    "CATALOG",
    "ERROR_CLASSES",
    "JSONRPC_CODES",
    "AmbiguousId",
    "AuthorizationFailed",
    "AuthorizationUnavailable",
    "BearerTokenRefused",
    "CallCancelled",
    "CallTimeout",
    "CatalogEntry",
    "CircuitOpen",
    "ControlFlow",
    "ConversionFailed",
    "DatabaseUnavailable",
    "EmptySource",
    "ExportFailed",
    "IdempotencyKeyReused",
    "InputError",
    "InternalError",
    "InvalidArgument",
    "InvalidOption",
    "InvalidParams",
    "InvalidRequest",
    "InvalidSetting",
    "JobNotFound",
    "JobStateForbids",
    "McpRuntimeError",
    "MethodNotFound",
    "MigrationRefused",
    "MissingCapability",
    "NotInitialized",
    "NothingToConvert",
    "ObjectAccessDenied",
    "ObjectNotFound",
    "OutputSchemaMismatch",
    "ParseError",
    "PathOutsideRoots",
    "PipelineError",
    "ProtocolError",
    "RateLimited",
    "ReplyTooLarge",
    "ResultStoreUnavailable",
    "ResultsExpired",
    "RoleForbidden",
    "ServerCannotReach",
    "ServerUnavailable",
    "SessionExpired",
    "SignInThrottled",
    "SourceNotFound",
    "SourceTooLarge",
    "SourceUnavailable",
    "Stage",
    "StoreError",
    "TenantQueueFull",
    "Unauthorized",
    "UnexpectedError",
    "UnknownJsonRpcError",
    "UnknownTenant",
    "UnknownTool",
    "UnsupportedFormat",
    "UrlRefused",
    "classify",
    "classify_jsonrpc",
    "entry",
    "error_for",
]
