"""Assembly of one fake server: state, profile, SDK server and app, control routes, HTTP layer."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from mcp.server.transport_security import TransportSecuritySettings
from starlette.types import ASGIApp

from tests.fakes.control import control_routes
from tests.fakes.event_store import FollowingEventStore
from tests.fakes.http_layer import HttpFaultLayer
from tests.fakes.knobs import Knobs
from tests.fakes.mcp_layer import FakeMcp
from tests.fakes.oauth_resource import protected_resource_route
from tests.fakes.profiles import make_profile
from tests.fakes.state import FakeState

MCP_PATH = "/mcp"


@dataclass(frozen=True)
class FakeServerOptions:
    """Start-up settings; ``reset`` returns the knobs to the values these imply."""

    profile: str = "docling"
    json_response: bool = False
    cache_dir: Path = Path("fake-docling-cache")
    cache_max_documents: int = 10
    host: str = "127.0.0.1"
    #: More Host headers to admit, as a server behind a proxy (tests/network's forwarders) is.
    also_hosts: tuple[str, ...] = ()


def build_app(options: FakeServerOptions) -> tuple[ASGIApp, FakeState]:
    defaults = Knobs(
        json_response=options.json_response, cache_max_documents=options.cache_max_documents
    )
    state = FakeState(defaults=defaults, cache_dir=str(options.cache_dir), profile=options.profile)
    profile = make_profile(options.profile, state)
    server_name = "docling" if options.profile == "docling" else "docling-per-format"
    fake = FakeMcp(state, profile, server_name)
    event_store = FollowingEventStore()

    def apply_session_knobs(knobs: Knobs) -> None:
        """Session-scoped knobs are read by the SDK when it admits a session."""
        manager = fake.server.session_manager
        manager.json_response = knobs.json_response
        manager.event_store = event_store if knobs.resumable else None
        manager.retry_interval = knobs.sse_retry_ms

    starlette_app = fake.server.streamable_http_app(
        streamable_http_path=MCP_PATH,
        json_response=defaults.json_response,
        event_store=event_store if defaults.resumable else None,
        retry_interval=defaults.sse_retry_ms,
        transport_security=TransportSecuritySettings(
            enable_dns_rebinding_protection=True,
            allowed_hosts=[f"{h}:*" for h in (options.host, "localhost", *options.also_hosts)],
            allowed_origins=[
                f"http://{h}:*" for h in (options.host, "localhost", *options.also_hosts)
            ],
        ),
        host=options.host,
        custom_starlette_routes=[
            *control_routes(state, apply_session_knobs),
            protected_resource_route(state),
        ],
    )
    return HttpFaultLayer(starlette_app, state, MCP_PATH), state
