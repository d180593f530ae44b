"""doclane's docling-rs profile against the real docling-rs-mcp 2.52.7, over stdio and HTTP.

What a worker does with this server: the profile chosen from its tools, every output format of
every sample (the PDF included), a page range that really limits the pages, every failure text
turned into its catalog code, the stateless revision, and a stdio child killed mid-conversion
replaced on the next call.
"""

from __future__ import annotations

import json
import os
import signal
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from errors import CallTimeout, PipelineError, ReplyTooLarge, ServerUnavailable
from pipeline.jobs.formats import KNOWN_FORMATS
from pipeline.mcp.client import McpClient
from pipeline.mcp.settings import McpSettings
from pipeline.mcp.stdio import StdioTransport
from pipeline.profiles.base import ConversionRequest, McpCallRecord, ToolCalls
from pipeline.profiles.docling_mcp import DoclingMcpProfile
from pipeline.profiles.docling_rs import DoclingRsProfile
from pipeline.profiles.selection import select_profile
from pipeline.settings.tree import read_settings
from tests.fixtures.docling_rs_server import DoclingRsServer, docling_rs_stdio_command
from tests.fixtures.docling_server import DoclingServer
from tests.fixtures.examples import EXPECTED_MARKDOWN, PDF_PAGE_HEADINGS, PDF_SAMPLE, example
from tests.fixtures.processes import process_gone
from tests.fixtures.waiting import wait_for

pytestmark = pytest.mark.docling

ALL_FORMATS = tuple(sorted(KNOWN_FORMATS))


def _make_client(transport: str, root: Path, server: DoclingRsServer, **settings: Any) -> McpClient:
    """A stdio child of this process, or the HTTP server with its bearer token."""
    settings.setdefault("request_timeout_s", 120)
    if transport == "stdio":
        return McpClient(settings=McpSettings(command=docling_rs_stdio_command([root]), **settings))
    http = McpSettings(auth="bearer", token=server.token, **settings)
    return McpClient(server.url, settings=http)


@pytest.fixture(scope="module", params=["stdio", "http"])
def client(
    request: pytest.FixtureRequest, docling_rs_root: Path, docling_rs_server: DoclingRsServer
) -> Iterator[McpClient]:
    with _make_client(request.param, docling_rs_root, docling_rs_server) as made:
        made.initialize()
        yield made


def _request(
    path: Path, formats: tuple[str, ...], source: Path | None = None, **options: object
) -> ConversionRequest:
    return ConversionRequest(
        source=str(source or path),
        kind="file",
        suffix=path.suffix,
        formats=formats,
        size_bytes=path.stat().st_size,
        options=options,
    )


def _convert(client: McpClient, request: ConversionRequest) -> dict[str, str]:
    calls: list[McpCallRecord] = []
    profile = select_profile(
        [tool.name for tool in client.tools()], request.formats, read_settings().profiles
    )
    assert isinstance(profile, DoclingRsProfile)
    outputs = profile.convert(ToolCalls(client, calls.append), request).outputs
    assert [call.tool for call in calls] == ["convert"] * len(request.formats)  # one per format
    return outputs


def _code(client: McpClient, request: ConversionRequest) -> PipelineError:
    with pytest.raises(PipelineError) as caught:
        _convert(client, request)
    return caught.value


def test_the_stateless_revision_and_the_engine(client: McpClient) -> None:
    info = client.server
    assert info is not None and (info.name, info.version) == ("docling-rs", "2.52.7")
    assert client.negotiated_version == "2026-07-28" and client.session_id is None


@pytest.mark.parametrize("name", [*sorted(EXPECTED_MARKDOWN), PDF_SAMPLE])
def test_every_format_of_every_sample(client: McpClient, name: str) -> None:
    outputs = _convert(client, _request(example(name), ALL_FORMATS))
    assert sorted(outputs) == list(ALL_FORMATS)
    for text in EXPECTED_MARKDOWN.get(name, PDF_PAGE_HEADINGS):
        assert text in outputs["md"], (name, text)
    assert not outputs["md"].endswith("\n")  # as docling writes it
    document = json.loads(outputs["json"])
    assert document["schema_name"] == "DoclingDocument"
    assert "<html" in outputs["html"].lower()
    assert outputs["text"].strip()
    assert not any(line.startswith("#") for line in outputs["text"].splitlines())
    chunks = json.loads(outputs["chunks"])["hierarchical"]
    assert chunks and all({"text", "headings", "doc_items"} <= set(chunk) for chunk in chunks)
    assert all(ref.startswith("#/") for chunk in chunks for ref in chunk["doc_items"])


def test_tables_are_padded_as_docling_pads_them_unless_told(client: McpClient) -> None:
    docx = example("quarterly-report.docx")
    padded = _convert(client, _request(docx, ("md",)))["md"]
    assert "| North    |      1200 |" in padded
    compact = DoclingRsProfile(compact_tables=True).convert(
        ToolCalls(client), _request(docx, ("md",))
    )
    assert "| North | 1200 |" in compact.outputs["md"]


def test_a_page_range_limits_the_pages(client: McpClient) -> None:
    pdf = example(PDF_SAMPLE)
    outputs = _convert(client, _request(pdf, ("chunks", "json", "md"), pages="1-2"))
    first, second, third = PDF_PAGE_HEADINGS
    assert first in outputs["md"] and second in outputs["md"] and third not in outputs["md"]
    assert len(json.loads(outputs["json"])["pages"]) == 2
    chunk_text = " ".join(chunk["text"] for chunk in json.loads(outputs["chunks"])["hierarchical"])
    assert second in chunk_text and third not in chunk_text
    everything = _convert(client, _request(pdf, ("json",)))
    assert len(json.loads(everything["json"])["pages"]) == 3


def test_the_other_options_reach_the_server(client: McpClient) -> None:
    """Options the server takes convert; a password on an unencrypted PDF is ignored by it."""
    pdf = example(PDF_SAMPLE)
    outputs = _convert(
        client, _request(pdf, ("md",), ocr_lang="en", text_layer_only=True, password="unused")
    )
    assert PDF_PAGE_HEADINGS[0] in outputs["md"]


def test_failure_texts_become_their_codes(
    client: McpClient, docling_rs_root: Path, tmp_path: Path
) -> None:
    corrupt = docling_rs_root / "corrupt.pdf"
    corrupt.write_bytes(b"%PDF-1.7 this is not a PDF at all")
    error = _code(client, _request(corrupt, ("md",)))
    assert error.code == "E306" and not error.retryable
    assert "not a readable PDF" in error.message  # the server's own text, kept

    unknown = docling_rs_root / "blob.xyz"
    unknown.write_bytes(bytes(range(256)) * 4)
    assert _code(client, _request(unknown, ("md",))).code == "E102"

    outside = tmp_path / "outside.docx"  # not under any of the server's roots
    outside.write_bytes(example("quarterly-report.docx").read_bytes())
    error = _code(client, _request(outside, ("md",)))
    assert error.code == "E315" and f"--root {tmp_path}" in error.message
    assert isinstance(error.detail, dict) and error.detail["root_to_add"] == str(tmp_path)

    missing = docling_rs_root / "gone.docx"  # under a root, but not there for the server
    error = _code(client, _request(outside, ("md",), source=missing))
    assert error.code == "E315" and "No such file" in error.message

    beyond = _code(client, _request(example(PDF_SAMPLE), ("md",), pages="7-9"))
    assert beyond.code == "E306" and "outside the document" in beyond.message


@pytest.fixture(scope="module")
def docling_markdown(docling_server: DoclingServer) -> dict[str, str]:
    """What docling-mcp (docling itself) writes for each sample it converts offline."""
    with McpClient(docling_server.url, settings=McpSettings(request_timeout_s=120)) as docling:
        docling.initialize()
        return {
            name: DoclingMcpProfile()
            .convert(ToolCalls(docling), _request(example(name), ("md",)))
            .outputs["md"]
            for name in EXPECTED_MARKDOWN
        }


@pytest.mark.parametrize("name", sorted(EXPECTED_MARKDOWN))
def test_the_markdown_equals_docling_mcps(
    client: McpClient, docling_markdown: dict[str, str], name: str
) -> None:
    """By default the Markdown is docling's own, byte for byte, on every sample both convert."""
    assert _convert(client, _request(example(name), ("md",)))["md"] == docling_markdown[name]


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_deadlines_and_reply_caps_hold_as_for_docling_mcp(
    transport: str, docling_rs_root: Path, docling_rs_server: DoclingRsServer
) -> None:
    big = _big_html(docling_rs_root)
    with _make_client(
        transport, docling_rs_root, docling_rs_server, timeout_small_s=0.3,
        timeout_medium_s=0.3, timeout_large_s=0.3, max_reply_bytes=4096,
    ) as capped:  # fmt: skip
        capped.initialize()
        with pytest.raises(CallTimeout):
            _convert(capped, _request(big, ("md",)))
        with pytest.raises(ReplyTooLarge):  # its Docling JSON is 20 KB and more
            _convert(capped, _request(example("quarterly-report.docx"), ("json",)))
        small = _convert(capped, _request(example("cities.csv"), ("md",)))  # still usable
        assert "| Lisbon" in small["md"]


@pytest.fixture(scope="module")
def stdio_client(docling_rs_root: Path) -> Iterator[McpClient]:
    settings = McpSettings(
        command=docling_rs_stdio_command([docling_rs_root]), request_timeout_s=120
    )
    with McpClient(settings=settings) as made:
        made.initialize()
        yield made


def test_a_child_killed_mid_conversion_is_replaced_on_the_next_call(
    stdio_client: McpClient, docling_rs_root: Path
) -> None:
    client = stdio_client
    transport = client._transport
    assert isinstance(transport, StdioTransport)
    client.ping()
    first = transport.child_pid
    assert first is not None
    big = _big_html(docling_rs_root)
    before = _cpu_ticks(first)

    def kill_once_converting() -> None:
        # Converting shows as the child's CPU time rising well above its idle figure.
        wait_for(lambda: _cpu_ticks(first) >= before + 20, timeout=60, interval=0.005)
        os.kill(first, signal.SIGKILL)

    killer = threading.Thread(target=kill_once_converting, daemon=True)
    killer.start()
    with pytest.raises(ServerUnavailable, match="SIGKILL"):
        _convert(client, _request(big, ("md",)))
    killer.join(30)
    wait_for(lambda: process_gone(first), message="the killed child gone")

    outputs = _convert(client, _request(example("handbook.html"), ("md",)))  # a fresh child
    assert "# Team Handbook" in outputs["md"]
    second = transport.child_pid
    assert second is not None and second != first


def _big_html(root: Path) -> Path:
    """A document that takes docling-rs-mcp seconds, not milliseconds (a 60,000-row table)."""
    big = root / "big.html"
    if not big.exists():
        rows = "".join(
            f"<tr><td>r{i}</td><td>{i * 7}</td><td>row {i}</td></tr>" for i in range(60000)
        )
        big.write_text(f"<html><body><h1>Big</h1><table>{rows}</table></body></html>")
    return big


def _cpu_ticks(pid: int) -> int:
    """User plus system CPU time of ``pid`` in clock ticks (``/proc/<pid>/stat``)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 1 << 62  # gone: nothing left to wait for
    return int(fields[11]) + int(fields[12])
