"""The fake Docling MCP server itself: process, fixture, profiles and control API.

Checked with the official MCP SDK client (``mcp.Client`` over ``mcp.client.streamable_http``) and
with raw httpx, never with doclane's own client: the fake is the yardstick for that client.
"""

from __future__ import annotations

import http.server
import json
import selectors
import subprocess
import sys
import threading
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import anyio
import httpx
import pytest
from mcp import Client

from tests.fakes.profiles import DOCLING_TOOLS_FILE
from tests.fixtures.fake_server import REPO_ROOT, FakeServer, FakeServerError, FakeServerFactory
from tests.fixtures.processes import process_gone
from tests.fixtures.waiting import wait_for
from tests.support.raw_mcp import RawSession

T = TypeVar("T")

CONVERT = "convert_document_into_docling_document"
EXPORT = "export_docling_document_to_markdown"


def with_sdk_client(url: str, action: Callable[[Client], Awaitable[T]], **options: Any) -> T:
    """Run ``action`` with an official SDK client connected (handshake era) to ``url``."""

    async def main() -> T:
        async with Client(url, mode="legacy", **options) as client:
            return await action(client)

    return anyio.run(main)


@pytest.fixture
def samples(tmp_path: Path) -> dict[str, Path]:
    files = {
        "md": ("report.md", "# Quarterly Report\n\nRevenue grew.\n\n| Name | Value |\n|---|---|\n"
                            "| alpha | 1 |\n| beta | 2 |\n"),
        "html": ("page.html", "<html><head><title>ignored</title><style>p{}</style></head><body>"
                              "<h1>HTML Heading</h1><p>Hello <b>world</b></p>"
                              "<table><tr><th>City</th><th>Pop</th></tr>"
                              "<tr><td>Oslo</td><td>700</td></tr></table>"
                              "<ul><li>one</li><li>two</li></ul></body></html>"),
        "csv": ("data.csv", "Name,Value\nalpha,1\nbeta,2\n"),
        "docx": ("memo.docx", "PK\x03\x04 not really a zip"),
        "txt": ("notes.xyz", "unsupported"),
    }  # fmt: skip
    paths = {}
    for kind, (name, text) in files.items():
        paths[kind] = tmp_path / name
        paths[kind].write_text(text)
    return paths


# --- the process and the fixture ---------------------------------------------------------


def test_fixture_gives_a_reset_running_server(fake_server: FakeServer) -> None:
    assert fake_server.running
    assert fake_server.url == f"{fake_server.origin}/mcp"
    assert fake_server.url.startswith("http://127.0.0.1:")
    stats = fake_server.stats()
    assert stats["requests_by_method"] == {}
    assert stats["cached_documents"] == []
    assert fake_server.knobs()["fail_next"] == 0
    health = httpx.get(f"{fake_server.origin}/_control/health").json()
    assert health == {"ok": True, "profile": "docling", "pid": fake_server.pid}


def test_server_announces_its_url_on_stdout_once_listening(tmp_path: Path) -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.fakes.server", "--port", "0", "--cache-dir", str(tmp_path)],
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    try:
        assert process.stdout is not None
        with selectors.DefaultSelector() as selector:
            selector.register(process.stdout, selectors.EVENT_READ)
            assert selector.select(timeout=30), "no URL announced within 30 s"
        url = process.stdout.readline().decode().strip()
        assert url.startswith("http://127.0.0.1:") and url.endswith("/mcp")
        # Announced means listening: the very first request is answered.
        assert httpx.get(url.removesuffix("/mcp") + "/_control/health").json()["ok"] is True
    finally:
        process.terminate()
        process.wait(timeout=10)


def test_server_exits_with_its_parent(tmp_path: Path) -> None:
    url_file = tmp_path / "url"
    parent = (
        "import subprocess, sys, pathlib\n"
        "from tests.fixtures.waiting import wait_for\n"
        f"url_file = pathlib.Path({str(url_file)!r})\n"
        "p = subprocess.Popen([sys.executable, '-m', 'tests.fakes.server', '--port', '0',\n"
        "    '--exit-with-parent', '--url-file', str(url_file)],\n"
        "    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)\n"
        "wait_for(url_file.exists, timeout=30)\n"
        "print(p.pid)\n"
    )
    output = subprocess.run(
        [sys.executable, "-c", parent], cwd=REPO_ROOT, capture_output=True, check=True, timeout=60
    )
    child = int(output.stdout.decode().strip())
    wait_for(lambda: process_gone(child), timeout=15, message="orphaned fake server to exit")


def test_restart_keeps_the_port_and_loses_sessions_and_documents(
    fake_server_factory: FakeServerFactory, samples: dict[str, Path]
) -> None:
    server = fake_server_factory()
    port, pid = server.port, server.pid
    with RawSession(server.url) as session:
        session.initialize()
        key = session.call_tool(CONVERT, {"source": str(samples["md"])}).result[
            "structuredContent"
        ]["document_key"]
        server.restart()
        assert (server.port, server.url) == (port, f"http://127.0.0.1:{port}/mcp")
        assert server.pid != pid
        assert process_gone(pid)
        reply = session.call_tool(EXPORT, {"document_key": key})
        assert reply.status == 404
        session.session_id = None
        session.initialize()
        assert session.call_tool(EXPORT, {"document_key": key}).result["isError"] is True


def test_factory_runs_independent_instances_in_parallel(
    fake_server_factory: FakeServerFactory,
) -> None:
    first, second = fake_server_factory(), fake_server_factory(profile="per-format")
    assert first.origin != second.origin
    first.configure(fail_next=1, fail_with="http503")
    assert second.knobs()["fail_next"] == 0
    assert httpx.get(f"{second.origin}/_control/health").json()["profile"] == "per-format"
    first.stop()
    assert not first.running and second.running
    with pytest.raises(FakeServerError):
        first.stats()


def test_unknown_or_invalid_knobs_are_refused(fake_server: FakeServer) -> None:
    with pytest.raises(FakeServerError, match="fail_nxt"):
        fake_server.configure(fail_nxt=1)
    with pytest.raises(FakeServerError, match="fail_with"):
        fake_server.configure(fail_with="explode")
    with pytest.raises(FakeServerError, match="require_auth"):
        fake_server.configure(require_auth={"token": "x"})


def test_reset_restores_every_knob(fake_server: FakeServer) -> None:
    defaults = fake_server.knobs()
    changed = fake_server.configure(
        fail_next=3, fail_with="jsonrpc:-32603", delay_s=2, tools_page_size=4, emit_progress=True
    )
    assert changed != defaults
    assert fake_server.reset() == defaults


# --- profile docling -------------------------------------------------------------------------


def test_docling_profile_lists_the_real_tools_verbatim(fake_server: FakeServer) -> None:
    real = json.loads(DOCLING_TOOLS_FILE.read_text())["tools"]
    with RawSession(fake_server.url) as session:
        session.initialize()
        listed = session.request("tools/list").result["tools"]
    assert listed == real
    assert len(listed) == 21
    names = with_sdk_client(fake_server.url, lambda c: c.list_tools())
    assert {tool.name for tool in names.tools} == {tool["name"] for tool in real}


def test_docling_convert_export_and_save_through_the_sdk_client(
    fake_server: FakeServer, samples: dict[str, Path]
) -> None:
    async def convert_all(client: Client) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for kind in ("md", "html", "csv", "docx"):
            converted = await client.call_tool(CONVERT, {"source": str(samples[kind])})
            key = converted.structured_content["document_key"]
            exported = await client.call_tool(EXPORT, {"document_key": key})
            out[kind] = (converted.structured_content, exported.structured_content)
        again = await client.call_tool(CONVERT, {"source": str(samples["md"])})
        out["again"] = again.structured_content
        out["saved"] = (await client.call_tool(
            "save_docling_document", {"document_key": out["md"][0]["document_key"]}
        )).structured_content  # fmt: skip
        out["listed"] = (await client.call_tool("list_cached_documents", {})).structured_content
        out["check"] = (await client.call_tool(
            "check_document_in_local_cache", {"document_key": out["csv"][0]["document_key"]}
        )).structured_content  # fmt: skip
        return out

    out = with_sdk_client(fake_server.url, convert_all)
    md_key = out["md"][0]["document_key"]
    assert len(md_key) == 32 and out["md"][0]["from_cache"] is False
    assert out["again"] == {"from_cache": True, "document_key": md_key}
    assert out["md"][1] == {"document_key": md_key, "markdown": samples["md"].read_text()}
    html_md = out["html"][1]["markdown"]
    assert "# HTML Heading" in html_md and "Hello world" in html_md
    assert "| City | Pop |" in html_md and "| Oslo | 700 |" in html_md and "- one" in html_md
    assert "ignored" not in html_md
    assert "| Name | Value |" in out["csv"][1]["markdown"]
    assert "| beta | 2 |" in out["csv"][1]["markdown"]
    assert out["docx"][1]["markdown"].startswith("# memo\n")
    saved = out["saved"]
    assert Path(saved["md_file"]).read_text() == samples["md"].read_text()
    docling_json = json.loads(Path(saved["json_file"]).read_text())
    assert docling_json["schema_name"] == "DoclingDocument" and docling_json["name"] == "report"
    assert md_key in out["listed"]["document_keys"] and len(out["listed"]["document_keys"]) == 4
    assert out["check"] == {"in_cache": True}
    assert fake_server.stats()["requests_by_tool"][CONVERT] == 5


def test_docling_failures_look_like_the_real_server(
    fake_server: FakeServer, samples: dict[str, Path], tmp_path: Path
) -> None:
    with RawSession(fake_server.url) as session:
        session.initialize()
        for source in (str(tmp_path / "missing.docx"), str(samples["txt"]), str(tmp_path),
                       "https://example.com/a.pdf"):  # fmt: skip
            result = session.call_tool(CONVERT, {"source": source}).result
            assert result["isError"] is True
            assert result["content"] == [
                {"type": "text", "text": f"Error executing tool {CONVERT}"}
            ]
        result = session.call_tool(EXPORT, {"document_key": "0" * 32}).result
        assert (
            result["isError"] is True
            and result["content"][0]["text"] == f"Error executing tool {EXPORT}"
        )
        result = session.call_tool("no_such_tool", {}).result
        assert result["content"][0]["text"] == "Unknown tool: no_such_tool"
        result = session.call_tool(CONVERT, {}).result
        assert result["isError"] is True
        assert result["content"][0]["text"].startswith(f"Error executing tool {CONVERT}: ")
        assert "'source' is a required property" in result["content"][0]["text"]
        extra = session.call_tool(CONVERT, {"source": str(samples["md"]), "extra": 1}).result
        assert extra["isError"] is False


def test_document_cache_is_an_lru_of_the_configured_size(
    fake_server: FakeServer, samples: dict[str, Path]
) -> None:
    fake_server.configure(cache_max_documents=2)
    with RawSession(fake_server.url) as session:
        session.initialize()
        keys = [
            session.call_tool(CONVERT, {"source": str(samples[k])}).result["structuredContent"][
                "document_key"
            ]
            for k in ("md", "html", "csv")
        ]
        assert session.call_tool(EXPORT, {"document_key": keys[0]}).result["isError"] is True
        assert session.call_tool(EXPORT, {"document_key": keys[2]}).result["isError"] is False
    stats = fake_server.stats()
    assert stats["cache_evictions"] == 1 and set(stats["cached_documents"]) == set(keys[1:])


def test_evict_empties_the_cache_so_known_keys_fail(
    fake_server: FakeServer, samples: dict[str, Path]
) -> None:
    with RawSession(fake_server.url) as session:
        session.initialize()
        key = session.call_tool(CONVERT, {"source": str(samples["md"])}).result[
            "structuredContent"
        ]["document_key"]
        assert session.call_tool(EXPORT, {"document_key": key}).result["isError"] is False
        assert fake_server.evict() == 1
        result = session.call_tool(EXPORT, {"document_key": key}).result
        assert result["isError"] is True
        assert result["content"][0]["text"] == f"Error executing tool {EXPORT}"


# --- profile per-format ----------------------------------------------------------------------


@pytest.fixture
def http_files(tmp_path: Path) -> Iterator[str]:
    """A plain HTTP server on loopback serving ``tmp_path`` (for convert_url)."""
    handler = lambda *a: http.server.SimpleHTTPRequestHandler(*a, directory=str(tmp_path))  # noqa: E731
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()
    thread.join()


def test_per_format_profile_serves_the_seed_contract(
    fake_server_factory: FakeServerFactory, samples: dict[str, Path], http_files: str
) -> None:
    server = fake_server_factory(profile="per-format")

    async def run(client: Client) -> dict[str, Any]:
        tools = (await client.list_tools()).tools
        docx = await client.call_tool("convert_docx", {"file_path": str(samples["docx"])})
        html = await client.call_tool("convert_url", {"url": f"{http_files}/page.html"})
        csv = await client.call_tool("convert_url", {"url": samples["csv"].as_uri()})
        document = html.structured_content["document"]
        return {
            "tools": tools,
            "docx": docx.structured_content["document"],
            "csv": csv.structured_content["document"],
            "markdown": await client.call_tool("export_markdown", {"document": document}),
            "html": await client.call_tool("export_html", {"document": document}),
            "json": await client.call_tool("export_json", {"document": document}),
            "wrong": await client.call_tool("convert_pdf", {"file_path": str(samples["docx"])}),
        }

    out = with_sdk_client(server.url, run)
    assert [tool.name for tool in out["tools"]] == [
        "convert_pdf", "convert_docx", "convert_xlsx", "convert_pptx", "convert_url",
        "export_markdown", "export_html", "export_json",
    ]  # fmt: skip
    assert all(tool.output_schema for tool in out["tools"])
    assert out["docx"]["schema_name"] == "DoclingDocument" and out["docx"]["name"] == "memo"
    assert out["csv"]["tables"][0]["data"]["grid"][1][0]["text"] == "alpha"
    markdown = out["markdown"].structured_content["markdown"]
    assert "# HTML Heading" in markdown and "| Oslo | 700 |" in markdown
    html = out["html"].structured_content["html"]
    assert "<h1>HTML Heading</h1>" in html and "<td>Oslo</td>" in html
    assert out["json"].structured_content["json"]["texts"][0]["text"] == "HTML Heading"
    assert out["wrong"].is_error is True
    assert out["wrong"].content[0].text == "Error executing tool convert_pdf"


def test_per_format_export_refuses_a_document_that_is_not_docling_json(
    fake_server_factory: FakeServerFactory,
) -> None:
    server = fake_server_factory(profile="per-format")
    with RawSession(server.url) as session:
        session.initialize()
        result = session.call_tool("export_markdown", {"document": {"hello": "world"}}).result
    assert result["isError"] is True
    assert result["content"][0]["text"].startswith("Error executing tool export_markdown: ")


# --- counting --------------------------------------------------------------------------------


def test_every_request_is_counted_by_method_and_tool(
    fake_server: FakeServer, samples: dict[str, Path]
) -> None:
    with RawSession(fake_server.url) as session:
        session.initialize()
        session.request("tools/list")
        session.request("ping")
        session.call_tool(CONVERT, {"source": str(samples["md"])})
        session.call_tool(CONVERT, {"source": str(samples["csv"])})
        session.call_tool("list_cached_documents", {})
        session.delete()
    stats = fake_server.stats()
    assert stats["requests_by_method"] == {
        "initialize": 1, "notifications/initialized": 1, "tools/list": 1, "ping": 1,
        "tools/call": 3,
    }  # fmt: skip
    assert stats["requests_by_tool"] == {CONVERT: 2, "list_cached_documents": 1}
    assert stats["initialize_calls"] == 1
    assert stats["http_requests_by_verb"] == {"POST": 7, "DELETE": 1}
    assert stats["deletes"] == 1
    assert stats["session_ids_issued"] == stats["session_ids_seen"] == [session.session_id]


def test_stats_record_the_headers_clients_send(fake_server: FakeServer) -> None:
    async def call(client: Client) -> None:
        await client.list_tools()

    with_sdk_client(fake_server.url, call)
    stats = fake_server.stats()
    session_id = stats["session_ids_issued"][0]
    listing = stats["last_headers_by_method"]["tools/list"]
    assert listing["mcp-session-id"] == session_id
    assert listing["mcp-protocol-version"] == "2025-11-25"
    assert "text/event-stream" in listing["accept"]
    assert "mcp-session-id" not in stats["last_headers_by_method"]["initialize"]
    # The SDK client ends its session with DELETE on exit.
    wait_for(lambda: fake_server.stats()["deletes"] == 1, message="DELETE recorded")
    assert stats["last_request_headers"]["host"] == f"127.0.0.1:{fake_server.port}"
