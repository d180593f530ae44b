"""What the fake server's wire tests share: a document to convert and a raw session on the fake."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fixtures.fake_server import FakeServer
from tests.support.raw_mcp import RawSession


@pytest.fixture
def sample(tmp_path: Path) -> str:
    path = tmp_path / "report.md"
    path.write_text("# Report\n\nBody.\n")
    return str(path)


@pytest.fixture
def session(fake_server: FakeServer) -> Iterator[RawSession]:
    """An initialized raw session (httpx, no SDK) on the (reset) fake server."""
    with RawSession(fake_server.url) as raw:
        raw.initialize()
        yield raw
