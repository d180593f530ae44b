"""The exception classes, one per catalog code, grouped by family.

A class carries its code; every flag and text comes from the catalog row, so the classes add
nothing but a name to catch by. Instances carry what the wire said (JSON-RPC code, HTTP status,
the server's text) so a job row can keep the cause a Docling server gave, however thin.
"""

from __future__ import annotations

from typing import Any, ClassVar

from errors._catalog import CatalogEntry, entry


class PipelineError(Exception):
    """Root of every error doclane raises on purpose."""

    code: ClassVar[str] = "E399"

    def __init__(
        self,
        message: str | None = None,
        *,
        jsonrpc_code: int | None = None,
        http_status: int | None = None,
        detail: Any = None,
        retry_after: float | None = None,
    ) -> None:
        self.message = message or self.entry.title
        self.jsonrpc_code = jsonrpc_code
        self.http_status = http_status
        self.detail = detail
        #: Seconds after which trying again makes sense (an open circuit's reset, a 429's header).
        self.retry_after = retry_after
        super().__init__(f"{self.code}: {self.message}")

    @property
    def entry(self) -> CatalogEntry:
        return entry(self.code)

    @property
    def retryable(self) -> bool:
        return self.entry.retryable

    @property
    def trips_breaker(self) -> bool:
        return self.entry.trips_breaker

    @property
    def user_message(self) -> str:
        return self.entry.user_message

    @property
    def action(self) -> str:
        return self.entry.action

    def reword(self, message: str) -> None:
        """Replace the message, and ``str(error)`` with it ("E301: ..."), as ``__init__`` makes it.

        For a boundary that adds what it knows (a tool's name, what a submission had done) or
        conceals a secret in an error raised below it."""
        self.message = message
        self.args = (f"{self.code}: {message}",)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready view, the shape `--json` output and job rows use."""
        out: dict[str, Any] = {
            "code": self.code,
            "title": self.entry.title,
            "message": self.message,
            "user_message": self.user_message,
            "action": self.action,
            "retryable": self.retryable,
        }
        if self.jsonrpc_code is not None:
            out["jsonrpc_code"] = self.jsonrpc_code
        if self.http_status is not None:
            out["http_status"] = self.http_status
        if self.retry_after is not None:
            out["retry_after"] = self.retry_after
        if self.detail is not None:
            out["detail"] = self.detail
        return out

    def __reduce__(self) -> tuple[Any, ...]:
        # Keep keyword state across pickling (Celery and multiprocessing pickle exceptions).
        return (_rebuild, (type(self), self.message, self.__dict__.copy()))


def _rebuild(cls: type[PipelineError], message: str, state: dict[str, Any]) -> PipelineError:
    err = cls(message)
    err.__dict__.update(state)
    return err


# ---- E1xx: the input, checked locally before any server call --------------------------------
class InputError(PipelineError):
    """The source itself is unusable; no server was called."""


class SourceNotFound(InputError):
    code = "E101"


class UnsupportedFormat(InputError):
    code = "E102"


class SourceTooLarge(InputError):
    code = "E103"


class UrlRefused(InputError):
    code = "E104"


class PathOutsideRoots(InputError):
    code = "E105"


class EmptySource(InputError):
    code = "E106"


class SourceUnavailable(InputError):
    """The source's own server failed for now (5xx, 429, timeout): worth another try later.

    Not E302: that code means the *conversion* server and counts towards its breaker.
    """

    code = "E107"


class JobNotFound(InputError):
    """A request names a job that does not exist (the API answers 404)."""

    code = "E108"


class RoleForbidden(InputError):
    """A request its API token's role does not allow (the API answers 403)."""

    code = "E109"


class InvalidOption(InputError):
    """A conversion option of the job (a page range, a password's variable) is not valid."""

    code = "E110"


class ObjectNotFound(InputError):
    """An ``s3://`` source names a bucket or key the object store does not have."""

    code = "E111"


class ObjectAccessDenied(InputError):
    """The object store refused the credentials doclane holds for an ``s3://`` source."""

    code = "E112"


class ResultsExpired(InputError):
    """The job succeeded, but its results were deleted by the retention sweep."""

    code = "E113"


class SignInThrottled(InputError):
    """The console refuses sign-ins from an address that failed too many (the page answers 429)."""

    code = "E114"


class TenantQueueFull(InputError):
    """A document past its tenant's quota of queued jobs (``max_queued``): not queued; worth
    submitting again once the tenant's queue has drained (``retry_after``, when known)."""

    code = "E115"


class UnknownTenant(InputError):
    """A submission names a tenant no operator made: refused whole, before any job is made."""

    code = "E116"


class InvalidArgument(InputError):
    """A command's argument or option (the CLI exits 2), or a request's field, is not valid."""

    code = "E117"


class JobStateForbids(InputError):
    """What was asked of a job its state does not allow: the results of a job that has not
    succeeded, cancelling a finished one, retrying a running one."""

    code = "E118"


class NothingToConvert(InputError):
    """A submission whose sources named no document to convert (empty folders, folders of
    other kinds of files, globs matching none of them), and refused no source either."""

    code = "E119"


class InvalidSetting(InputError, ValueError):
    """A variable of the environment (or ``.env``) the settings tree cannot read: its name,
    what it wants, never its value (which may be a secret). A ``ValueError`` too, as pydantic's
    refusal it stands for was: the callers that read a setting and catch that keep working."""

    code = "E120"


class AmbiguousId(InputError):
    """A short id (the first characters of a job's or a submission's id) that more than one
    has: refused rather than guessed, since a command would act on the wrong job."""

    code = "E121"


class RateLimited(InputError):
    """A caller past its rate of API requests (DOCLANE_API_RATE_LIMIT): 429, ``retry_after``
    seconds until its window has room. Not the tenant's queue quota (E115)."""

    code = "E122"


class IdempotencyKeyReused(InputError):
    """An ``Idempotency-Key`` sent again with another body: the first submission stands."""

    code = "E123"


class BearerTokenRefused(InputError):
    """A bearer JWT the API does not accept (expired, not yet valid, another issuer or audience,
    an algorithm refused, a bad signature, an unknown key): 401, why in ``detail.reason``."""

    code = "E124"


# ---- E2xx: JSON-RPC protocol -----------------------------------------------------------------
class ProtocolError(PipelineError):
    """The server's JSON-RPC layer said no, or said something unreadable."""


class ParseError(ProtocolError):
    code = "E200"


class InvalidRequest(ProtocolError):
    code = "E201"


class MethodNotFound(ProtocolError):
    code = "E202"


class InvalidParams(ProtocolError):
    code = "E203"


class InternalError(ProtocolError):
    code = "E204"


class UnknownJsonRpcError(ProtocolError):
    code = "E299"


# ---- E3xx: MCP runtime -----------------------------------------------------------------------
class McpRuntimeError(PipelineError):
    """The MCP conversation itself failed: reachability, lifecycle, tools, breaker."""


class NotInitialized(McpRuntimeError):
    code = "E301"


class ServerUnavailable(McpRuntimeError):
    code = "E302"


class CallTimeout(McpRuntimeError):
    code = "E303"


class UnknownTool(McpRuntimeError):
    code = "E304"


class MissingCapability(McpRuntimeError):
    code = "E305"


class ConversionFailed(McpRuntimeError):
    code = "E306"


class ExportFailed(McpRuntimeError):
    code = "E307"


class SessionExpired(McpRuntimeError):
    code = "E308"


class CircuitOpen(McpRuntimeError):
    code = "E309"


class Unauthorized(McpRuntimeError):
    code = "E310"


class OutputSchemaMismatch(McpRuntimeError):
    code = "E311"


class ReplyTooLarge(McpRuntimeError):
    """The server sent more than ``DOCLANE_MCP_MAX_REPLY_BYTES``; reading stopped at the cap.

    Not retryable (the same document gives the same reply) and not the server's sickness, so
    it leaves the breaker alone.
    """

    code = "E312"


class AuthorizationFailed(McpRuntimeError):
    """No access token: discovery found no authorization server, or it refused the client.

    Final, and not the conversion server's sickness: the same credentials fail the same way.
    """

    code = "E313"


class AuthorizationUnavailable(McpRuntimeError):
    """The authorization server was unreachable, too slow or answered 5xx: worth another try.

    It leaves the breaker alone: that breaker measures the conversion server, not the issuer.
    """

    code = "E314"


class ServerCannotReach(McpRuntimeError):
    """The server refused a document doclane could read: outside its roots, or not there.

    A deployment's configuration, not the document's fault nor the server's sickness: final,
    and the breaker is left alone.
    """

    code = "E315"


class UnexpectedError(McpRuntimeError):
    """Something doclane did not foresee; classified so it is still explained, never lost."""

    code = "E399"


# ---- E4xx: the job store ---------------------------------------------------------------------
class StoreError(PipelineError):
    """The job database failed."""


class DatabaseUnavailable(StoreError):
    code = "E401"


class ResultStoreUnavailable(StoreError):
    """The object store that keeps results (``DOCLANE_RESULT_STORE=s3://...``) failed."""

    code = "E402"


class MigrationRefused(StoreError):
    """The migrations on disk and in the database disagree, or one failed (``doclane db``)."""

    code = "E403"


# ---- control flow: signals that unwind work, not failures -------------------------------------
class ControlFlow(PipelineError):
    """Not an error of anything: a signal that unwinds the work in hand to the code that
    catches it by class, and stops there.

    A PipelineError so that the layers it passes through on its way, which classify whatever
    comes by (retry's giveup, the breaker's count), let it pass untouched: never retried,
    never counted for or against a server. Its own flags say so, whatever a catalog row says.
    It has no code of its own because it is never recorded: one that reached a job row or an
    answer would have escaped the code meant to catch it, a bug, and reads E399 there.
    """

    @property
    def retryable(self) -> bool:
        return False

    @property
    def trips_breaker(self) -> bool:
        return False


class CallCancelled(ControlFlow):
    """The caller withdrew the request (its job was cancelled): not a failure of anything.

    Raised by the MCP client when a :class:`pipeline.mcp.watchdog.CancelScope` is cancelled:
    the attempt that owned the job stops and writes nothing.
    """


def _collect(root: type[PipelineError]) -> dict[str, type[PipelineError]]:
    found: dict[str, type[PipelineError]] = {}
    for sub in root.__subclasses__():
        if "code" in sub.__dict__:
            found[sub.code] = sub
        found.update(_collect(sub))
    return found


#: Code -> the class that raises it.
ERROR_CLASSES: dict[str, type[PipelineError]] = _collect(PipelineError)


def error_for(code: str, message: str | None = None, **kwargs: Any) -> PipelineError:
    """Build the error for a catalog code."""
    return ERROR_CLASSES[code](message, **kwargs)
