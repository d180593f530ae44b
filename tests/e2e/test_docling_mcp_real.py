"""doclane's client against the real docling-mcp 3.3.0 (local conversion mode, offline).

These are the facts the rest of doclane builds on: the handshake the server really answers, its
21 tools, the two-step convert + export on every sample format, and the shape of its failures
(``isError`` results with no cause text, which only ``errors.classify`` turns into E306/E307).
PDF is not here: docling's layout model must be downloaded, and these machines cannot.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

import errors
from pipeline.mcp.client import McpClient
from pipeline.mcp.lifecycle import LifecycleState
from pipeline.settings.tree import read_settings
from tests.fixtures.docling_server import DoclingServer
from tests.fixtures.examples import EXPECTED_MARKDOWN, example

pytestmark = pytest.mark.docling

CONVERT = "convert_document_into_docling_document"
EXPORT = "export_docling_document_to_markdown"
SAVE = "save_docling_document"
TOOLS_JSON = Path(__file__).resolve().parents[1] / "fakes" / "docling_mcp_3_3_0_tools.json"


@pytest.fixture(params=["auto", "2025-11-25"], ids=["2026-07-28", "2025-11-25"])
def client(docling_server: DoclingServer, request: pytest.FixtureRequest) -> Iterator[McpClient]:
    """Every fact below, in both revisions: ``auto`` finds 2026-07-28 (docling-mcp 3.3.0 serves
    it), and the 2025-11-25 session handshake pinned."""
    settings = read_settings(mcp=dict(protocol_version=request.param)).mcp
    with McpClient(docling_server.url, settings=settings) as c:
        c.initialize()
        yield c


def test_initialize_negotiates_the_latest_revision_and_sees_tools(
    client: McpClient, docling_server: DoclingServer
) -> None:
    assert client.state is LifecycleState.READY
    assert client.origin == docling_server.origin
    info = client.server
    assert info is not None
    assert info.name == "docling"
    assert info.has_tools
    if client.settings.protocol_version == "auto":  # stateless: discovery, no session
        assert client.negotiated_version == info.protocol_version == "2026-07-28"
        assert client.session_id is None
    else:
        assert client.negotiated_version == info.protocol_version == "2025-11-25"
        assert re.fullmatch(r"[0-9a-f]{32}", client.session_id or "")


def test_the_tool_list_is_the_measured_one(client: McpClient) -> None:
    measured = json.loads(TOOLS_JSON.read_text())["tools"]
    listed = {tool.name: tool for tool in client.tools()}
    assert len(listed) == 21
    assert sorted(listed) == sorted(tool["name"] for tool in measured)
    assert listed[CONVERT].input_schema["required"] == ["source"]
    assert client.registry_stats().size == 21


@pytest.mark.parametrize("name", sorted(EXPECTED_MARKDOWN))
def test_convert_then_export_keeps_headings_and_cells(client: McpClient, name: str) -> None:
    path = example(name)
    converted = client.call_tool(CONVERT, {"source": str(path)}, size_bytes=path.stat().st_size)
    assert not converted.is_error, converted.text
    assert converted.structured is not None
    key = converted.structured["document_key"]
    assert re.fullmatch(r"[0-9a-f]{32}", key)

    exported = client.call_tool(EXPORT, {"document_key": key})
    assert not exported.is_error, exported.text
    assert exported.structured is not None
    markdown = exported.structured["markdown"]
    for text in EXPECTED_MARKDOWN[name]:
        assert text in markdown, f"{text!r} missing from the markdown of {name}:\n{markdown}"


def test_the_same_file_converts_to_the_same_key_from_the_cache(client: McpClient) -> None:
    source = {"source": str(example("handbook.html"))}
    first = client.call_tool(CONVERT, source)
    second = client.call_tool(CONVERT, source)
    assert first.structured is not None and second.structured is not None
    assert second.structured["document_key"] == first.structured["document_key"]
    assert second.structured["from_cache"] is True


def test_save_writes_markdown_and_docling_json_into_the_cache_dir(
    client: McpClient, docling_server: DoclingServer
) -> None:
    converted = client.call_tool(CONVERT, {"source": str(example("quarterly-report.docx"))})
    assert converted.structured is not None
    saved = client.call_tool(SAVE, {"document_key": converted.structured["document_key"]})
    assert not saved.is_error, saved.text
    assert saved.structured is not None
    json_file = Path(saved.structured["json_file"])
    assert json_file.parent == docling_server.cache_dir
    assert json.loads(json_file.read_text())["schema_name"] == "DoclingDocument"
    assert "Quarterly Report" in Path(saved.structured["md_file"]).read_text()


def test_a_missing_file_is_an_isError_result_classified_E306(
    client: McpClient, tmp_path: Path
) -> None:
    result = client.call_tool(CONVERT, {"source": str(tmp_path / "missing.docx")})
    assert result.is_error
    # The server hides the cause: the text names the tool and nothing else.
    assert result.text == f"Error executing tool {CONVERT}"
    error = errors.classify(result.raw, stage="convert")
    assert error.code == "E306"
    assert not error.retryable
    assert CONVERT in error.message


def test_an_unknown_key_is_an_isError_export_classified_E307(client: McpClient) -> None:
    result = client.call_tool(EXPORT, {"document_key": "0" * 32})
    assert result.is_error
    error = errors.classify(result.raw, stage="export")
    assert error.code == "E307"
    assert not error.retryable


def test_a_missing_argument_is_refused_before_sending(client: McpClient) -> None:
    with pytest.raises(errors.InvalidParams) as caught:
        client.call_tool(CONVERT, {})
    assert caught.value.code == "E203"


def test_a_folder_of_the_samples_in_one_batch_gives_the_same_markdown_as_one_by_one(
    client: McpClient, docling_server: DoclingServer, tmp_path: Path
) -> None:
    """The directory tool, proven key by key through the saved JSON's origin.filename."""
    from pipeline.profiles.base import ConversionRequest, ToolCalls
    from pipeline.profiles.docling_batch import BatchMember, DoclingBatchProfile
    from pipeline.profiles.docling_mcp import DoclingMcpProfile

    folder = tmp_path / "batch"
    folder.mkdir()
    names = sorted(EXPECTED_MARKDOWN)
    for name in names:
        (folder / name).write_bytes(example(name).read_bytes())
    single = DoclingMcpProfile.for_tools(
        frozenset(t.name for t in client.tools()), server_cache_dir=docling_server.cache_dir
    )
    batch = DoclingBatchProfile(single)
    assert DoclingBatchProfile.fits(frozenset(t.name for t in client.tools()))

    members = [BatchMember(name, (folder / name).stat().st_size) for name in names]
    converted = batch.convert(
        client, str(folder), members, ("json", "md"), lambda record, name: None, timeout=120
    )

    assert converted.unproven == [] and sorted(converted.converted) == names
    for name in names:
        alone = single.convert(
            ToolCalls(client),
            ConversionRequest(str(example(name)), "file", Path(name).suffix, ("md",)),
        )
        assert converted.converted[name].outputs["md"] == alone.outputs["md"], name
        for expected in EXPECTED_MARKDOWN[name]:
            assert expected in converted.converted[name].outputs["md"]
        origin = json.loads(converted.converted[name].outputs["json"])["origin"]
        assert origin["filename"] == name


def test_the_real_server_keeps_the_facts_the_proof_by_elimination_rests_on(
    client: McpClient, docling_server: DoclingServer, tmp_path: Path
) -> None:
    """Keys content-derived, origins carrying the content hash and readable from the start of
    the file: one key left unsaved, every markdown the one-by-one conversion's."""
    import hashlib
    import os

    from pipeline.profiles.base import ConversionRequest, ToolCalls
    from pipeline.profiles.docling_batch import BatchMember, DoclingBatchProfile
    from pipeline.profiles.docling_mcp import DoclingMcpProfile

    folder = tmp_path / "eliminated"
    folder.mkdir()
    names = sorted(EXPECTED_MARKDOWN)
    for name in names:
        (folder / name).write_bytes(example(name).read_bytes())
    tools = frozenset(t.name for t in client.tools())
    single = DoclingMcpProfile.for_tools(tools, server_cache_dir=docling_server.cache_dir)
    members = [
        BatchMember(name, (folder / name).stat().st_size,
                    hashlib.sha256((folder / name).read_bytes()).hexdigest())
        for name in names
    ]  # fmt: skip
    listing = [entry.name for entry in os.scandir(folder)]

    converted = DoclingBatchProfile(single).convert(
        client, str(folder), members, ("md",), lambda r, n: None, timeout=120, listing=listing
    )

    assert converted.unproven == [] and converted.eliminated in names
    for name in names:
        alone = single.convert(
            ToolCalls(client),
            ConversionRequest(str(folder / name), "file", Path(name).suffix, ("md",)),
        )
        assert converted.converted[name].outputs["md"] == alone.outputs["md"], name
        assert converted.converted[name].document_key == alone.document_key, name


def test_doclane_mcp_pinned_to_2026_07_28_pings_and_converts_on_docling_mcp(
    docling_server: DoclingServer,
) -> None:
    """MCP_PROTOCOL_VERSION=2026-07-28 doclane mcp ping|call --origin <docling-mcp> --json."""
    import os
    import subprocess
    import sys

    doclane = str(Path(sys.executable).with_name("doclane"))
    env = {**os.environ, "MCP_PROTOCOL_VERSION": "2026-07-28"}
    ping = subprocess.run(
        [doclane, "mcp", "ping", "--origin", docling_server.origin, "--json"],
        capture_output=True, text=True, timeout=120, check=False, env=env,
    )  # fmt: skip
    assert ping.returncode == 0, ping.stderr
    assert json.loads(ping.stdout)["server"]["protocol_version"] == "2026-07-28"
    call = subprocess.run(
        [doclane, "mcp", "call", CONVERT, "--args",
         json.dumps({"source": str(example("quarterly-report.docx"))}),
         "--origin", docling_server.origin, "--json"],
        capture_output=True, text=True, timeout=120, check=False, env=env,
    )  # fmt: skip
    assert call.returncode == 0, call.stderr
    report = json.loads(call.stdout)  # pinned: anything but 2026-07-28 would have been E305
    assert re.fullmatch(r"[0-9a-f]{32}", report["result"]["structured"]["document_key"])
