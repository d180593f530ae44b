"""Opening a conversation with an MCP server: which revision, the handshake, the capability check.

With ``MCP_PROTOCOL_VERSION=auto`` (the default) the handshake first probes
``server/discover``: a server that offers the stateless 2026-07-28 revision is used without a
session (every request stamped, :mod:`._revision`); any other answer but a transport failure
falls back to the 2025-11-25 ``initialize`` handshake, which negotiates down as the server
answers. A pinned version is honoured as it is: ``2026-07-28`` never falls back, a 2025
version never discovers.

Either way the handshake ends with the server checked (a supported version, the ``tools``
capability) and its tool list read in full, and hands all of it back as one
:class:`Established`; the client decides what to keep. It holds no state of its own, so the
client may run it again whenever the server forgets a session.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from errors import MissingCapability, ParseError, PipelineError, ProtocolError
from pipeline.mcp._revision import (
    AUTO,
    MODERN_VERSION,
    UNSUPPORTED_PROTOCOL_VERSION,
    Discovery,
    invalid_header_declaration,
)
from pipeline.mcp._session import JsonRpcSession
from pipeline.mcp.protocol import (
    LATEST_PROTOCOL_VERSION,
    SUPPORTED_PROTOCOL_VERSIONS,
    JsonObject,
    ServerInfo,
    Tool,
    tools_page,
)
from pipeline.mcp.transport import Binding

#: The handshake is the client's lifecycle: its messages stay under the client's logger.
logger = logging.getLogger("doclane.mcp.client")

#: A server that pages tools/list forever is broken; stop listening to it here.
_MAX_TOOL_PAGES = 1000


@dataclass(frozen=True, slots=True)
class Established:
    """What a successful handshake learned.

    ``generation`` is the tool registry's generation when the handshake began: a
    ``tools/list_changed`` that arrived meanwhile makes the listed tools stale on arrival.
    """

    binding: Binding
    server: ServerInfo
    tools: list[Tool]
    generation: int


class Handshake:
    """Runs the handshake of one client, on its session, as often as the client asks."""

    def __init__(
        self,
        session: JsonRpcSession,
        *,
        protocol_version: str,
        timeout: float,
        require_tools: bool,
        registry_generation: Callable[[], int],
        shown: str,
    ) -> None:
        """``protocol_version`` is ``auto`` or one to insist on; ``timeout`` bounds each of
        the handshake's requests; ``require_tools=False`` accepts a server without the
        ``tools`` capability; ``shown`` is how logs name the endpoint."""
        self.protocol_version = protocol_version
        self._session = session
        self._timeout = timeout
        self._require_tools = require_tools
        self._generation = registry_generation
        self._shown = shown

    def run(self) -> Established:
        """Stateless discovery where asked for and offered, else the 2025 handshake.

        Raises E305 (unsupported protocol version, no ``tools`` capability), E302/E303/E310
        (cannot reach the server, too slow, refused) and the E2xx a JSON-RPC error maps to.
        """
        if self.protocol_version in (AUTO, MODERN_VERSION):
            established = self._discover()
            if established is not None:
                return established
        return self._initialize_session()

    def list_tools(self, binding: Binding) -> list[Tool]:
        """Every page of ``tools/list``, leaving out tools whose headers cannot be honoured."""
        tools: list[Tool] = []
        cursor: str | None = None
        seen: set[str] = set()
        for _page in range(_MAX_TOOL_PAGES):
            params: JsonObject = {} if cursor is None else {"cursor": cursor}
            result = self._session.exchange(
                "tools/list", params, timeout=self._timeout, binding=binding
            ).result
            page, cursor = tools_page(result)
            tools.extend(self._usable(page))
            if cursor is None:
                return tools
            if cursor in seen:
                raise ParseError(f"tools/list repeated the cursor {cursor!r}")
            seen.add(cursor)
        raise ParseError(f"tools/list did not end after {_MAX_TOOL_PAGES} pages")

    # --- 2026-07-28: discovery, no session ------------------------------------------------------

    def _discover(self) -> Established | None:
        """``server/discover`` -> checks -> tools/list; None: fall back to ``initialize``."""
        generation = self._generation()
        binding = Binding(None, MODERN_VERSION)
        result = self._ask_discover(binding)
        if result is None:
            return None
        discovery = Discovery.from_wire(result)
        if MODERN_VERSION not in discovery.versions:
            if self.protocol_version == AUTO:
                return None
            raise MissingCapability(
                f"the server offers protocol {', '.join(discovery.versions) or '(none)'}, "
                f"not {MODERN_VERSION}",
                detail={"supported": list(discovery.versions)},
            )
        server = ServerInfo.from_wire(
            {
                "protocolVersion": MODERN_VERSION,
                "capabilities": discovery.capabilities,
                "serverInfo": discovery.server_info,
            }
        )
        self._check_tools(server)
        tools = self.list_tools(binding) if server.has_tools else []
        return Established(binding, server, tools, generation)

    def _ask_discover(self, binding: Binding) -> JsonObject | None:
        """The ``server/discover`` result; None where ``auto`` should fall back.

        Only ``auto`` falls back, and only on an answer that says "not this revision" (a
        JSON-RPC or HTTP refusal); a server that cannot be reached, is too slow or refuses our
        credentials is that, whatever its revision.
        """
        for attempt in (1, 2):
            try:
                return self._session.exchange(
                    "server/discover", {}, timeout=self._timeout, binding=binding
                ).result
            except PipelineError as exc:
                if attempt == 1 and _names_the_revision(exc):
                    continue  # -32022 naming 2026-07-28 among its versions: ask once more
                if not _refused_the_revision(exc):
                    raise
                if self.protocol_version == AUTO:
                    logger.info("%s: no 2026-07-28 discovery (%s); initializing", self._shown, exc)
                    return None
                raise MissingCapability(
                    f"the server does not offer protocol {MODERN_VERSION}: "
                    f"{exc.code}: {exc.message}",
                    detail={"cause": exc.to_dict()},
                ) from exc
        raise AssertionError("unreachable: the second attempt returns or raises")

    # --- 2025-11-25 and older: the initialize handshake -----------------------------------------

    def _initialize_session(self) -> Established:
        """initialize -> checks -> notifications/initialized -> tools/list (all pages)."""
        asked = LATEST_PROTOCOL_VERSION if self.protocol_version == AUTO else self.protocol_version
        params = {
            "protocolVersion": asked,
            "capabilities": {},
            "clientInfo": self._session.client_info,
        }
        generation = self._generation()
        exchange = self._session.exchange(
            "initialize", params, timeout=self._timeout, binding=Binding()
        )
        server = ServerInfo.from_wire(exchange.result)
        binding = Binding(exchange.session_id, server.protocol_version)
        try:
            if server.protocol_version not in SUPPORTED_PROTOCOL_VERSIONS:
                raise MissingCapability(
                    f"the server answered protocol {server.protocol_version!r}; doclane speaks "
                    + ", ".join(SUPPORTED_PROTOCOL_VERSIONS),
                    detail={"server_version": server.protocol_version},
                )
            self._check_tools(server)
            self._session.notify(
                "notifications/initialized", binding=binding, timeout=self._timeout
            )
            tools = self.list_tools(binding) if server.has_tools else []
        except BaseException:
            self._session.transport.delete(binding)  # leave no half-made session behind
            raise
        return Established(binding, server, tools, generation)

    def _check_tools(self, server: ServerInfo) -> None:
        """E305 for a server without tools, unless this handshake was told to accept one."""
        if self._require_tools and not server.has_tools:
            raise MissingCapability(
                "the server declares no tools capability",
                detail={"capabilities": sorted(server.capabilities)},
            )

    def _usable(self, tools: list[Tool]) -> list[Tool]:
        """Tools whose ``x-mcp-header`` declarations can be honoured; the others are left out
        (a call of one is E304), as the 2026-07-28 revision asks of a client."""
        kept = []
        for tool in tools:
            problem = invalid_header_declaration(tool.input_schema)
            if problem is None:
                kept.append(tool)
            else:
                logger.warning("%s: leaving out tool %s: %s", self._shown, tool.name, problem)
        return kept


def _names_the_revision(exc: PipelineError) -> bool:
    """A -32022 ("unsupported protocol version") whose supported versions include ours: the
    server refused this request, not the revision, so asking again is worth it once."""
    detail = exc.detail if isinstance(exc.detail, Mapping) else {}
    supported = detail.get("supported")
    return (
        exc.jsonrpc_code == UNSUPPORTED_PROTOCOL_VERSION
        and isinstance(supported, list)
        and MODERN_VERSION in supported
    )


def _refused_the_revision(exc: PipelineError) -> bool:
    """Whether ``server/discover`` failed because the server answered "not this revision"
    (a JSON-RPC error, or an HTTP 4xx that is not about credentials), as opposed to being
    unreachable, too slow, failing (5xx) or refusing us: only the former means "try the 2025
    handshake", as the official SDK's probe decides too."""
    if isinstance(exc, ProtocolError | MissingCapability) or exc.jsonrpc_code is not None:
        return exc.code != "E310"
    status = exc.http_status
    return status is not None and 400 <= status < 500 and status not in (401, 403, 429)
