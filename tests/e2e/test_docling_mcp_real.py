"""doclane's client against the real docling-mcp 3.3.0 (local conversion mode, offline).

PDF is not here: docling's layout model must be downloaded, and these machines cannot.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import errors
from pipeline.mcp import McpClient, load_mcp_settings
from tests.fixtures.docling_server import DoclingServer

pytestmark = pytest.mark.docling

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
CONVERT = "convert_document_into_docling_document"
EXPORT = "export_docling_document_to_markdown"
REAL_TOOL_NAMES = {
    "convert_document_into_docling_document",
    "convert_directory_files_into_docling_document",
    "export_docling_document_to_markdown",
    "save_docling_document",
    "list_cached_documents",
    "check_document_in_local_cache",
}


@pytest.fixture
def client(docling_server: DoclingServer) -> McpClient:
    with McpClient(docling_server.url, settings=load_mcp_settings()) as c:
        c.initialize()
        yield c


def test_initialize_negotiates_and_finds_tools(client: McpClient) -> None:
    assert client.negotiated_version == "2025-11-25"
    assert client.server is not None and client.server.name == "docling"
    names = {tool.name for tool in client.tools()}
    assert len(names) == 21
    assert names >= REAL_TOOL_NAMES


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("quarterly-report.docx", ["Quarterly Report", "North", "3400"]),
        ("handbook.html", ["# Team Handbook", "Monday", "Planning"]),
    ],
)
def test_convert_then_export(client: McpClient, name: str, expected: list[str]) -> None:
    path = EXAMPLES / name
    converted = client.call_tool(CONVERT, {"source": str(path)}, size_bytes=path.stat().st_size)
    assert not converted.is_error, converted.text
    key = converted.structured["document_key"]
    assert len(key) == 32
    exported = client.call_tool(EXPORT, {"document_key": key})
    assert not exported.is_error
    markdown = exported.structured["markdown"]
    for text in expected:
        assert text in markdown


def test_a_missing_file_is_an_isError_result_classified_E306(
    client: McpClient, tmp_path: Path
) -> None:
    result = client.call_tool(CONVERT, {"source": str(tmp_path / "missing.docx")})
    assert result.is_error
    error = errors.classify(result.raw, stage="convert")
    assert error.code == "E306" and CONVERT in error.message


def test_an_unknown_key_is_an_isError_export_classified_E307(client: McpClient) -> None:
    result = client.call_tool(EXPORT, {"document_key": "0" * 32})
    assert result.is_error
    assert errors.classify(result.raw, stage="export").code == "E307"


def test_a_missing_argument_is_refused_before_sending(client: McpClient) -> None:
    with pytest.raises(errors.InvalidParams):
        client.call_tool(CONVERT, {})
