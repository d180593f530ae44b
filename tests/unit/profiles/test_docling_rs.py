"""The docling-rs profile's decisions against a scripted client: arguments, options, codes.

The real server is exercised in tests/e2e/test_docling_rs_mcp.py; here the exact arguments the
profile sends and the code each failure text becomes are pinned, with the profiles that cannot
take options refusing them.
"""

from __future__ import annotations

from typing import Any

import pytest

from errors import MissingCapability, PipelineError
from pipeline.profiles.base import ConversionRequest, ToolCalls
from pipeline.profiles.docling_mcp import DoclingMcpProfile
from pipeline.profiles.docling_rs import SIGNATURE, DoclingRsProfile
from pipeline.profiles.per_format import PerFormatProfile
from pipeline.profiles.selection import select_profile
from pipeline.profiles.settings import ProfileSettings
from tests.support.scripted_profiles import DOCLING_TOOLS, Result, ScriptedClient, failed


def text(value: str) -> Result:
    return Result({"content": [{"type": "text", "text": value}]})


def rs_request(*formats: str, source: str = "/srv/in/a.pdf", **options: Any) -> ConversionRequest:
    return ConversionRequest(
        source=source, kind="file", suffix=".pdf", formats=formats, options=options
    )


def test_chosen_from_its_tools_first_and_by_name() -> None:
    assert select_profile(SIGNATURE, ["md", "chunks"], ProfileSettings()).name == "docling-rs"
    forced = ProfileSettings(profile="docling-rs")
    with pytest.raises(MissingCapability, match="do not fit the docling-rs profile"):
        select_profile(DOCLING_TOOLS, ["md"], forced)
    with pytest.raises(MissingCapability, match="docling-mcp cannot give text, chunks"):
        select_profile(DOCLING_TOOLS, ["md", "text", "chunks"], ProfileSettings())


def test_one_convert_call_per_format_with_the_jobs_options() -> None:
    client = ScriptedClient({"convert": lambda args: text(f"<{args['to']}>\n")})
    request = rs_request("md", "chunks", pages="1-2", password="s3cret")
    conversion = DoclingRsProfile().convert(ToolCalls(client), request)
    assert conversion.outputs == {"md": "<md>", "chunks": "<chunks>\n"}  # md: docling's ending
    assert client.calls == [
        (
            "convert",
            {
                "uri": "/srv/in/a.pdf",
                "to": "md",
                "options": {"pages": "1-2", "password": "s3cret", "compact_tables": False},
            },
        ),
        (
            "convert",
            {
                "uri": "/srv/in/a.pdf",
                "to": "chunks",
                "options": {"pages": "1-2", "password": "s3cret"},
            },
        ),
    ]


def test_compact_tables_is_the_operators_choice() -> None:
    client = ScriptedClient({"convert": lambda args: text("x")})
    DoclingRsProfile(compact_tables=True).convert(ToolCalls(client), rs_request("md"))
    assert client.calls[0][1]["options"] == {"compact_tables": True}


@pytest.mark.parametrize(
    ("server_text", "code"),
    [
        ("parse error: pdf: not a readable PDF: the file is damaged or not a PDF", "E306"),
        ("parse error: docx: bad zip", "E306"),
        ("/srv/in/a.pdf: could not determine input format (hint: unrecognized extension)", "E102"),
        ("cannot open /srv/in/a.pdf: No such file or directory (os error 2)", "E315"),
        (
            "/srv/in/a.pdf is outside the server's root (/data); start the server with --root",
            "E315",
        ),
        ("something nobody foresaw", "E306"),
        ("", "E306"),
    ],
)
def test_each_failure_text_becomes_its_code(server_text: str, code: str) -> None:
    client = ScriptedClient({"convert": lambda args: failed(server_text)})
    with pytest.raises(PipelineError) as caught:
        DoclingRsProfile().convert(ToolCalls(client), rs_request("md"))
    error = caught.value
    assert error.code == code and not error.retryable
    assert server_text.strip() in error.message  # the server's words are kept
    if code == "E315":
        assert "--root /srv/in" in error.message


def test_an_upload_out_of_reach_names_the_inbox_and_its_setting() -> None:
    """Every upload has a folder of its own in the inbox: the fix is the inbox, not that one."""
    client = ScriptedClient(
        {"convert": lambda args: failed(f"{args['uri']} is outside the server's root (/srv/in)")}
    )
    upload = "/data/inbox/uploads/4f1c0e/notes.md"
    request = ConversionRequest(
        source=upload, kind="file", suffix=".md", formats=("md",), inbox="/data/inbox"
    )
    with pytest.raises(PipelineError) as caught:
        DoclingRsProfile().convert(ToolCalls(client), request)
    error = caught.value
    assert error.code == "E315" and "DOCLANE_INBOX_DIR" in error.message
    assert "--root /data/inbox " in error.message and "/uploads/4f1c0e " not in error.message
    assert error.detail["root_to_add"] == "/data/inbox"
    assert error.detail["setting"] == "DOCLANE_INBOX_DIR"


def test_a_url_the_server_may_not_fetch_says_how_to_let_it() -> None:
    client = ScriptedClient(
        {"convert": lambda args: failed("fetching URLs is disabled on this server")}
    )
    request = ConversionRequest(
        source="https://x.org/a.pdf", kind="url", suffix="", formats=("md",)
    )
    with pytest.raises(PipelineError) as caught:
        DoclingRsProfile().convert(ToolCalls(client), request)
    assert caught.value.code == "E315" and "DOCLANE_URL_MODE" in caught.value.message


@pytest.mark.parametrize("profile", [DoclingMcpProfile(), PerFormatProfile()])
def test_profiles_without_options_refuse_them_before_calling(profile: Any) -> None:
    client = ScriptedClient({})
    with pytest.raises(MissingCapability, match=r"cannot honour conversion options \(pages\)"):
        profile.convert(ToolCalls(client), rs_request("md", pages="1-2"))
    assert client.calls == []


@pytest.mark.parametrize(
    ("endpoint", "expected"),
    [
        ("stdio:/opt/docling-rs-mcp --root /srv --concurrency 6", 6),
        ("stdio:/opt/docling-rs-mcp --concurrency=5 --root /srv", 5),
        ("stdio:/opt/docling-rs-mcp --concurrency 3 --concurrency 4", 4),  # the last one given
        ("stdio:/opt/docling-rs-mcp --root '/srv/a b'", 2),  # its default
        ("stdio:/opt/docling-rs-mcp --concurrency", 2),  # the server refuses to start so
        ("stdio:/opt/docling-rs-mcp --root /srv/--concurrency=9", 2),  # a word, not the flag
        ("http://rs:3001/mcp", 2),  # over HTTP nothing tells
    ],
)
def test_the_concurrency_its_command_line_says(endpoint: str, expected: int) -> None:
    assert DoclingRsProfile.concurrency(endpoint) == expected
