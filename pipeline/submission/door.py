"""The door: a submission no configured server can serve is refused before any job is made.

A worker picks its profile for each try from the tools of the server it got
(``pipeline.profiles.selection.select_profile``), and a job asking for what that profile cannot give
fails there with E305: a page range on a docling-mcp fleet, Docling JSON without
``DOCLANE_SERVER_CACHE_DIR``, HTML from a server without ``export_html``. Those jobs cannot
succeed anywhere, so the door asks the same question at submission and refuses the whole
submission with the same code.

What the submitter knows without asking anyone, from the settings it shares with the workers:

- every profile gives Markdown, so a Markdown-only submission without options passes at once
  (the common one: no call is made);
- a forced profile (``DOCLANE_PROFILE``) decides alone what it can never give: no options
  but on docling-rs, no JSON on docling-mcp without ``DOCLANE_SERVER_CACHE_DIR``; docling-rs,
  whose contract does not vary by server, decides alone what it can always give;
- the servers configured (``DOCLING_MCP_ORIGIN``, ``DOCLING_MCP_COMMAND``): the ones to ask.

What it cannot know without asking: which profile an ``auto`` server fits, and which formats
a docling-mcp or per-format server's tools give. Then the door asks each configured server for
its tool list (an MCP handshake and ``tools/list``), once, and keeps the answer for
``TOOLS_KEPT_S`` (a long-lived API process notices a server swapped under it); the submission
passes when one server can serve it. A server that does not answer cannot be judged: the
submission passes, as before the door, and the workers decide (a failed question is kept for
``UNANSWERED_KEPT_S``, so a server that is down costs one connection attempt, not one a
submission). The door judges with the submitter's settings; a submitter configured otherwise
than the workers is judged by its own.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, NoReturn

from errors import MissingCapability, PipelineError
from pipeline.jobs.formats import Formats
from pipeline.jobs.options import ConversionOptions
from pipeline.profiles.docling_mcp import CHECK_CACHE, CONVERT, EXPORT_MARKDOWN, SAVE
from pipeline.profiles.docling_rs import SIGNATURE, DoclingRsProfile
from pipeline.profiles.per_format import TOOLS
from pipeline.profiles.selection import select_profile
from pipeline.profiles.settings import ProfileSettings

if TYPE_CHECKING:
    from pipeline.mcp.settings import McpSettings

log = logging.getLogger("doclane.door")

#: How long a server's tool list is kept before it is asked again.
TOOLS_KEPT_S = 300.0
#: How long a server that did not answer is left unasked.
UNANSWERED_KEPT_S = 30.0
#: Every tool a profile can use: a server offering all of them is the best any can be, which
#: is what a forced profile can do at most.
_EVERY_TOOL = frozenset({*SIGNATURE, CONVERT, EXPORT_MARKDOWN, SAVE, CHECK_CACHE, *TOOLS})

ToolLister = Callable[[str], frozenset[str]]


@dataclass(slots=True)
class _Answer:
    tools: frozenset[str] | None
    until: float


@dataclass(slots=True)
class Door:
    """Admits or refuses a submission's formats and options for the configured servers."""

    #: The servers the workers convert on (``McpSettings.endpoints``).
    endpoints: Sequence[str]
    profile_settings: ProfileSettings
    #: Asks one endpoint for its tool names; raises when it cannot.
    list_tools: ToolLister
    _answers: dict[str, _Answer] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def admit(self, formats: Formats, options: ConversionOptions) -> None:
        """Return when some configured server can (or may) give ``formats`` with ``options``;
        E305 when none can."""
        names = sorted(options.stored())
        if self._surely_served(formats, names):
            return
        never = self._why_not(_EVERY_TOOL, formats, names)
        if never is not None:  # not even the best server of the configured profile could
            self._refuse(formats, names, [never], asked=0)
        reasons: list[str] = []
        for number, endpoint in enumerate(self.endpoints, start=1):
            tools = self._tools(endpoint)
            if tools is None:
                log.info("%s did not say what it can do: the workers will judge", endpoint)
                return
            why = self._why_not(tools, formats, names)
            if why is None:
                return
            # the servers' addresses are the operator's business, not every submitter's
            reasons.append(f"server {number}: {why}" if len(self.endpoints) > 1 else why)
        if reasons:
            self._refuse(formats, names, reasons, asked=len(reasons))

    def _surely_served(self, formats: Formats, options: list[str]) -> bool:
        if self.profile_settings.profile == DoclingRsProfile.name:
            return not DoclingRsProfile().missing_formats(formats)
        return markdown_alone(formats, options)

    def _why_not(self, tools: frozenset[str], formats: Formats, options: list[str]) -> str | None:
        """None when a server offering ``tools`` serves them; else why not."""
        try:
            select_profile(tools, formats, self.profile_settings, options=options)
        except MissingCapability as refused:
            return refused.message
        return None

    def _refuse(
        self, formats: Formats, options: list[str], reasons: list[str], *, asked: int
    ) -> NoReturn:
        given = f" with options {', '.join(options)}" if options else ""
        where = "no configured server" if asked else "no server of the configured profile"
        raise MissingCapability(
            f"{where} can convert to {formats}{given}: " + "; ".join(reasons),
            detail={
                "formats": list(formats),
                "options": options,
                "profile_setting": self.profile_settings.profile,
                "servers_asked": asked,
            },
        )

    def _tools(self, endpoint: str) -> frozenset[str] | None:
        now = time.monotonic()
        with self._lock:
            kept = self._answers.get(endpoint)
            if kept is not None and kept.until > now:
                return kept.tools
        try:
            tools: frozenset[str] | None = self.list_tools(endpoint)
        except (PipelineError, OSError) as exc:
            log.warning("cannot ask %s what it can do: %s", endpoint, exc)
            tools = None
        kept_s = TOOLS_KEPT_S if tools is not None else UNANSWERED_KEPT_S
        with self._lock:
            self._answers[endpoint] = _Answer(tools, time.monotonic() + kept_s)
        return tools


def markdown_alone(formats: Formats, options: ConversionOptions | list[str]) -> bool:
    """Every profile gives Markdown: a submission of it alone, without options, any server
    that fits a profile can serve."""
    return formats == ("md",) and not options


def admit(formats: Formats, options: ConversionOptions, door: Door | None = None) -> None:
    """``door.admit``, by default with this process's door, built (its settings read) only
    when the submission needs more than Markdown alone."""
    if door is None:
        if markdown_alone(formats, options):
            return
        door = process_door()
    door.admit(formats, options)


def server_tools(endpoint: str, settings: McpSettings | None = None) -> frozenset[str]:
    """The tool names ``endpoint`` offers, asked over MCP with ``settings`` (by default this
    process's environment's)."""
    from pipeline.mcp.client import McpClient  # only a submission that must ask loads the client

    with McpClient(endpoint, settings=settings) as client:
        client.initialize()
        return frozenset(tool.name for tool in client.tools())


_doors: dict[tuple[str | None, str], Door] = {}
_doors_lock = threading.Lock()


def door_for(mcp: McpSettings | None, profiles: ProfileSettings) -> Door:
    """A door for these settings (a composition root builds one from its tree's sections and
    keeps it: the API in its context, for every request), asking with these MCP settings."""
    return Door(_endpoints_of(mcp), profiles, lambda endpoint: server_tools(endpoint, mcp))


def process_door() -> Door:
    """The door of this process's environment, for a submission made without a settings
    tree at hand (a library caller; the CLI and the API hand theirs down), its answers kept
    across submissions: one door a configuration."""
    from pipeline.mcp.settings import McpSettings

    try:
        mcp: McpSettings | None = McpSettings.from_environment()
    except ValueError as exc:  # a submitter need not be able to talk to the servers to submit
        log.warning("no server will be asked at submission: %s", exc)
        mcp = None
    profiles = ProfileSettings.from_environment()
    key = (mcp.model_dump_json() if mcp else None, profiles.model_dump_json())
    with _doors_lock:
        door = _doors.get(key)
        if door is None:
            door = _doors[key] = door_for(mcp, profiles)
        return door


def _endpoints_of(mcp: McpSettings | None) -> list[str]:
    """The configured servers; none (nothing is asked) when there are no MCP settings or they
    name no server that parses."""
    if mcp is None:
        return []
    try:
        return mcp.endpoints
    except ValueError as exc:
        log.warning("no server will be asked at submission: %s", exc)
        return []
