"""What every profile shares: the request, the output, the per-call report and the call helper.

A profile only knows tool names and argument shapes. The client it is handed does transport,
lifecycle and size-based timeouts; the resilience layer around the whole unit does retry and
breaking. So the one thing a profile must get right besides the contract is to turn an
``isError`` result into E306/E307 (keeping whatever text the server gave) and to report every
call, good or bad, so the job's history shows what the server was asked and how it went.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from errors import (
    CallCancelled,
    MissingCapability,
    PipelineError,
    Stage,
    UnexpectedError,
    classify,
)


class ToolResultView(Protocol):
    """The part of the MCP client's ``ToolResult`` a profile reads."""

    @property
    def is_error(self) -> bool: ...

    @property
    def raw(self) -> Mapping[str, Any]: ...


class ToolView(Protocol):
    @property
    def name(self) -> str: ...


class ToolClient(Protocol):
    """The part of ``pipeline.mcp.client.McpClient`` a profile uses (one origin, initialized)."""

    def call_tool(
        self,
        name: str,
        arguments: dict[str, Any],
        size_bytes: int | None = None,
        timeout: float | None = None,
    ) -> Any: ...

    def tools(self) -> Sequence[Any]: ...


@dataclass(frozen=True, slots=True)
class ConversionRequest:
    """One document to convert, as the server must see it.

    ``source`` is what the server reads: a path already mapped to the server's view
    (``DOCLANE_PATH_MAP``) or a URL. ``suffix`` is the document's type (".docx"), which the
    per-format contract needs to pick its tool; ``size_bytes`` picks the timeout tier (None for
    a URL of unknown size, which gets the top tier). ``options`` are the job's conversion
    options as the server is to get them (``pages``, ``ocr_lang``, ``text_layer_only``,
    ``password``: the secret itself, read from the worker's environment just before the call,
    never stored).
    """

    source: str
    kind: Literal["file", "url"]
    suffix: str
    formats: tuple[str, ...]
    size_bytes: int | None = None
    options: Mapping[str, Any] = field(default_factory=dict, repr=False)
    #: The inbox as the server sees it, when the document is doclane's own file there (an
    #: upload, a download): a server that cannot read it is told to read the inbox, whose
    #: setting is ``DOCLANE_INBOX_DIR``, not the folder of this one file.
    inbox: str | None = None


@dataclass(frozen=True, slots=True)
class McpCallRecord:
    """One tool call as the job's history keeps it."""

    tool: str
    duration_s: float
    outcome: Literal["ok", "error"]
    code: str | None = None
    message: str | None = None
    #: Which step of the contract the call served (a successful convert means exporting next).
    stage: Stage = "convert"


CallReporter = Callable[[McpCallRecord], None]


def ignore_call(_record: McpCallRecord) -> None:
    """A reporter for callers that keep no history (diagnostics, tests)."""


@dataclass(slots=True)
class KeptDocument:
    """What a try's convert call gave that its exports need (a docling-mcp document key, a
    per-format contract's document), kept for the attempt's next try on the same server.

    A try that converted and then failed on its way out (a transient export error, a session
    the server forgot) is retried whole by the resilience layer. Converting again is the costly
    part (650-800 ms a document on docling-mcp) and a second conversion in the trail, so the
    next try exports what was kept instead. A kept docling-mcp key can be gone by then (the
    server restarted or evicted it): the profile then converts again, as for a key evicted
    mid-try.
    """

    document: Any = None


@dataclass(slots=True)
class Conversion:
    """What a profile produced: one text per wanted format, plus how it got there."""

    profile: str
    outputs: dict[str, str]
    document_key: str | None = None
    #: Conversions this try made: 0 when it exported a document kept from an earlier try.
    conversions: int = 1
    notes: list[str] = field(default_factory=list)
    #: The engine that converted it, as the server names itself ("docling-rs 2.52.7").
    engine: str | None = None


class Profile(Protocol):
    """A tool contract: which tools it needs, which formats it gives, how to run one document."""

    name: str
    #: Whether its server takes a job's conversion options (``pages``, ``ocr_lang``, ...);
    #: submission refuses options no configured server's profile takes.
    takes_options: bool

    def fits(self, tool_names: frozenset[str]) -> bool:
        """Whether a server offering ``tool_names`` speaks this contract."""
        ...

    def missing_formats(self, formats: Sequence[str]) -> list[str]:
        """The wanted formats this profile cannot produce here (empty when all can be)."""
        ...

    def concurrency(self, endpoint: str) -> int | None:
        """How many conversions the server at ``endpoint`` really runs at once, as far as its
        contract tells (and, for a child doclane starts, its command line); None when nothing
        does. A round keeps no more than that in flight on it: more only queue or contend."""
        ...

    def convert(
        self, calls: ToolCalls, request: ConversionRequest, kept: KeptDocument | None = None
    ) -> Conversion:
        """Convert one document and export every wanted format, on this one client.

        ``kept`` is this attempt's memory of the server (see :class:`KeptDocument`): a profile
        whose exports read what its convert gave stores it there, and exports a kept one rather
        than convert again. Profiles that convert and export in one call ignore it.
        """
        ...


def refuse_options(profile: str, options: Collection[str]) -> None:
    """E305 when a job asks for conversion options this profile's server cannot take.

    Submission refuses such a job at the door when it can tell which profile the configured
    servers have (``pipeline.submission.door``); a worker still calls this, for a job submitted
    before its server changed."""
    if options:
        names = ", ".join(sorted(options))
        raise MissingCapability(
            f"the {profile} server cannot honour conversion options ({names}); "
            "convert with a docling-rs-mcp server, or submit without them",
            detail={"profile": profile, "options": sorted(options)},
        )


@dataclass(frozen=True, slots=True)
class ToolCalls:
    """One try's calls on one server: the client, and the reporter every call goes to.

    The two travel together through a profile (no call goes unreported), so a profile takes
    this one value rather than both.
    """

    client: ToolClient
    report: CallReporter = ignore_call

    def call(
        self,
        tool: str,
        arguments: dict[str, Any],
        *,
        stage: Stage,
        size_bytes: int | None = None,
        timeout: float | None = None,
        raise_on_error: bool = True,
    ) -> ToolResultView:
        """Call ``tool``, report it, and turn an ``isError`` result into E306/E307 (by ``stage``).

        With ``raise_on_error=False`` an ``isError`` result is reported and returned, for
        callers that have a plan B (an evicted document key is converted again).
        """
        report = self.report
        started = time.monotonic()
        try:
            result: ToolResultView = self.client.call_tool(
                tool, arguments, size_bytes=size_bytes, timeout=timeout
            )
        except CallCancelled:
            raise  # withdrawn by its caller (the job was cancelled): not an outcome to report
        except PipelineError as exc:
            elapsed = time.monotonic() - started
            report(McpCallRecord(tool, elapsed, "error", exc.code, exc.message, stage))
            raise
        except Exception as exc:
            err = classify(exc)
            elapsed = time.monotonic() - started
            report(McpCallRecord(tool, elapsed, "error", err.code, err.message, stage))
            raise err from exc
        duration = time.monotonic() - started
        if result.is_error:
            err = classify(dict(result.raw), stage=stage)
            report(McpCallRecord(tool, duration, "error", err.code, err.message, stage))
            if raise_on_error:
                raise _with_tool(err, tool)
            return result
        report(McpCallRecord(tool, duration, "ok", stage=stage))
        return result


def structured(result: ToolResultView, tool: str) -> Mapping[str, Any]:
    """The result's structured content; older servers send it only as JSON text."""
    raw = result.raw
    content = raw.get("structuredContent")
    if isinstance(content, Mapping):
        return content
    for block in raw.get("content") or []:
        if isinstance(block, Mapping) and block.get("type") == "text":
            try:
                parsed = json.loads(str(block.get("text", "")))
            except ValueError:
                continue
            if isinstance(parsed, Mapping):
                return parsed
    raise UnexpectedError(f"{tool} returned no structured content", detail={"tool": tool})


def text_of(result: ToolResultView) -> str:
    """All text blocks of a result, joined (for tools that answer in plain text)."""
    parts = [
        str(block.get("text", ""))
        for block in result.raw.get("content") or []
        if isinstance(block, Mapping) and block.get("type") == "text"
    ]
    return "\n".join(parts)


def require_str(data: Mapping[str, Any], key: str, tool: str) -> str:
    value = data.get(key)
    if not isinstance(value, str):
        raise UnexpectedError(
            f"{tool} answered without a string {key!r}", detail={"tool": tool, "keys": list(data)}
        )
    return value


def _with_tool(err: PipelineError, tool: str) -> PipelineError:
    """Name the tool in the error, keeping the server's text (often all the cause there is)."""
    if tool not in err.message:
        err.reword(f"{tool}: {err.message}")
    detail = dict(err.detail) if isinstance(err.detail, Mapping) else {}
    detail.setdefault("tool", tool)
    err.detail = detail
    return err
