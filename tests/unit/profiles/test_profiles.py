"""Profiles against a scripted tool client: the call sequence, eviction, and error codes.

The fake MCP server exercises the same profiles over the wire in the integration suite; here a
scripted client (no transport can exist without a server) pins the exact decisions.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from errors import (
    ConversionFailed,
    ExportFailed,
    MissingCapability,
    ReplyTooLarge,
    ServerUnavailable,
)
from pipeline.profiles.base import ConversionRequest, KeptDocument, McpCallRecord, ToolCalls
from pipeline.profiles.docling_mcp import (
    CHECK_CACHE,
    CONVERT,
    EXPORT_MARKDOWN,
    SAVE,
    DoclingMcpProfile,
)
from pipeline.profiles.per_format import TOOLS as PER_FORMAT_TOOLS
from pipeline.profiles.per_format import PerFormatProfile
from pipeline.profiles.selection import select_profile
from pipeline.profiles.settings import ProfileSettings
from tests.support.scripted_profiles import (
    DOCLING_TOOLS,
    Result,
    ScriptedClient,
    failed,
    ok,
)


def request(*formats: str, source: str = "/in/a.docx", suffix: str = ".docx") -> ConversionRequest:
    return ConversionRequest(
        source=source, kind="file", suffix=suffix, formats=formats, size_bytes=10
    )


class DoclingServer:
    """Just enough of docling-mcp's cache semantics to script eviction."""

    def __init__(self, cache_dir: Path | None = None) -> None:
        self.cache: set[str] = set()
        self.evict_after_convert = 0
        self.cache_dir = cache_dir
        self.converts = 0

    def client(self) -> ScriptedClient:
        return ScriptedClient(
            {
                CONVERT: self.convert,
                EXPORT_MARKDOWN: self.export,
                SAVE: self.save,
                CHECK_CACHE: lambda a: ok({"in_cache": a["document_key"] in self.cache}),
            }
        )

    def convert(self, args: dict[str, Any]) -> Result:
        self.converts += 1
        key = f"key-{Path(args['source']).stem}"
        if self.evict_after_convert:
            self.evict_after_convert -= 1
        else:
            self.cache.add(key)
        return ok({"from_cache": False, "document_key": key})

    def export(self, args: dict[str, Any]) -> Result:
        key = args["document_key"]
        if key not in self.cache:
            return failed("Error executing tool export_docling_document_to_markdown")
        return ok({"document_key": key, "markdown": f"# {key}"})

    def save(self, args: dict[str, Any]) -> Result:
        key = args["document_key"]
        if key not in self.cache:
            return failed("Error executing tool save_docling_document")
        assert self.cache_dir is not None
        json_file = self.cache_dir / f"{key}.json"
        json_file.write_text(json.dumps({"name": key}))
        return ok({"md_file": str(self.cache_dir / f"{key}.md"), "json_file": str(json_file)})


def test_docling_converts_then_exports_markdown_and_reports_each_call() -> None:
    server = DoclingServer()
    client = server.client()
    records: list[McpCallRecord] = []
    out = DoclingMcpProfile.for_tools(DOCLING_TOOLS).convert(
        ToolCalls(client, records.append), request("md")
    )
    assert out.outputs == {"md": "# key-a"}
    assert client.names() == [CONVERT, EXPORT_MARKDOWN]
    assert client.calls[0][1] == {"source": "/in/a.docx"}
    assert [(r.tool, r.outcome, r.code) for r in records] == [
        (CONVERT, "ok", None),
        (EXPORT_MARKDOWN, "ok", None),
    ]


def test_docling_evicted_key_is_converted_again_once() -> None:
    server = DoclingServer()
    server.evict_after_convert = 1
    client = server.client()
    records: list[McpCallRecord] = []
    out = DoclingMcpProfile.for_tools(DOCLING_TOOLS).convert(
        ToolCalls(client, records.append), request("md")
    )
    assert out.outputs == {"md": "# key-a"}
    assert out.conversions == 2
    assert client.names() == [CONVERT, EXPORT_MARKDOWN, CHECK_CACHE, CONVERT, EXPORT_MARKDOWN]
    assert [r.code for r in records if r.outcome == "error"] == ["E307"]


def test_docling_key_vanishing_twice_is_an_overloaded_server_retried_later() -> None:
    """Evicted twice, the key says the server's cache is too small for the fleet, not that the
    document cannot be exported: E302, retryable, and the next try converts afresh."""
    server = DoclingServer()
    server.evict_after_convert = 2
    kept = KeptDocument()
    with pytest.raises(ServerUnavailable, match="vanished twice") as caught:
        DoclingMcpProfile.for_tools(DOCLING_TOOLS).convert(
            ToolCalls(server.client()), request("md"), kept
        )
    assert caught.value.retryable
    assert "DOCLING_MCP_CACHE_MAX_DOCUMENTS" in caught.value.message
    assert server.converts == 2
    assert kept.document is None


def test_docling_export_error_with_key_still_cached_is_e307_with_server_text() -> None:
    server = DoclingServer()
    client = server.client()
    client.handlers[EXPORT_MARKDOWN] = lambda a: failed("renderer exploded")
    with pytest.raises(ExportFailed) as caught:
        DoclingMcpProfile.for_tools(DOCLING_TOOLS).convert(ToolCalls(client), request("md"))
    assert "renderer exploded" in caught.value.message
    assert server.converts == 1


def test_docling_convert_error_is_e306_keeping_the_server_text() -> None:
    client = DoclingServer().client()
    client.handlers[CONVERT] = lambda a: failed(
        "Error executing tool convert_document_into_docling_document"
    )
    records: list[McpCallRecord] = []
    with pytest.raises(ConversionFailed) as caught:
        DoclingMcpProfile.for_tools(DOCLING_TOOLS).convert(
            ToolCalls(client, records.append), request("md")
        )
    assert "Error executing tool" in caught.value.message
    assert records[-1].code == "E306"


def test_transport_errors_are_reported_and_propagate_unchanged() -> None:
    client = DoclingServer().client()

    def down(_: dict[str, Any]) -> Result:
        raise ServerUnavailable("connection refused")

    client.handlers[CONVERT] = down
    records: list[McpCallRecord] = []
    with pytest.raises(ServerUnavailable):
        DoclingMcpProfile.for_tools(DOCLING_TOOLS).convert(
            ToolCalls(client, records.append), request("md")
        )
    assert [(r.tool, r.code) for r in records] == [(CONVERT, "E302")]


def test_docling_json_is_read_from_the_server_cache_folder(tmp_path: Path) -> None:
    server_cache = tmp_path / "server-cache"
    server_cache.mkdir()
    server = DoclingServer(cache_dir=server_cache)
    profile = DoclingMcpProfile.for_tools(DOCLING_TOOLS, server_cache_dir=server_cache)
    out = profile.convert(ToolCalls(server.client()), request("md", "json"))
    assert json.loads(out.outputs["json"]) == {"name": "key-a"}
    assert out.outputs["md"] == "# key-a"


def test_docling_json_through_a_mounted_cache_folder(tmp_path: Path) -> None:
    """The server writes /srv/cache/<key>.json; the worker reads the same folder elsewhere."""
    mounted = tmp_path / "mounted"
    mounted.mkdir()
    (mounted / "key-a.json").write_text('{"ok": true}')
    client = DoclingServer().client()
    client.handlers[SAVE] = lambda a: ok(
        {"md_file": "/srv/cache/key-a.md", "json_file": "/srv/cache/key-a.json"}
    )
    profile = DoclingMcpProfile.for_tools(DOCLING_TOOLS, server_cache_dir=mounted)
    out = profile.convert(ToolCalls(client), request("json"))
    assert out.outputs == {"json": '{"ok": true}'}


def test_docling_json_over_the_reply_bound_is_E312_and_not_read(tmp_path: Path) -> None:
    server_cache = tmp_path / "server-cache"
    server_cache.mkdir()
    server = DoclingServer(cache_dir=server_cache)
    client = server.client()
    save = client.handlers[SAVE]

    def save_big(arguments: dict[str, Any]) -> Result:
        result = save(arguments)
        (server_cache / "key-a.json").write_bytes(b"[" + b"0," * 4000 + b"0]")  # 8 KB
        return result

    client.handlers[SAVE] = save_big
    settings = ProfileSettings(server_cache_dir=server_cache, max_saved_bytes=4096)
    profile = select_profile(DOCLING_TOOLS, ["md", "json"], settings)
    with pytest.raises(ReplyTooLarge, match="4096") as caught:
        profile.convert(ToolCalls(client), request("md", "json"))
    assert caught.value.code == "E312" and not caught.value.retryable
    assert not caught.value.trips_breaker
    # Just under the bound it is read as it is.
    settings = ProfileSettings(server_cache_dir=server_cache, max_saved_bytes=8003)
    out = select_profile(DOCLING_TOOLS, ["json"], settings).convert(
        ToolCalls(client), request("json")
    )
    assert out.outputs["json"].startswith("[0,0,")


def test_docling_json_outside_the_cache_folder_is_not_read(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    cache.mkdir()
    secret = tmp_path / "secret.json"
    secret.write_text('{"secret": 1}')
    client = DoclingServer().client()
    client.handlers[SAVE] = lambda a: ok({"md_file": "x", "json_file": str(secret)})
    profile = DoclingMcpProfile.for_tools(DOCLING_TOOLS, server_cache_dir=cache)
    with pytest.raises(ExportFailed, match="cannot read"):
        profile.convert(ToolCalls(client), request("json"))


def test_selection_prefers_docling_and_refuses_json_without_cache_dir() -> None:
    settings = ProfileSettings()
    assert select_profile(DOCLING_TOOLS, ["md"], settings).name == "docling-mcp"
    with pytest.raises(MissingCapability, match="DOCLANE_SERVER_CACHE_DIR"):
        select_profile(DOCLING_TOOLS, ["md", "json"], settings)
    with_cache = ProfileSettings(server_cache_dir=Path("/tmp"))
    assert select_profile(DOCLING_TOOLS, ["md", "json"], with_cache).name == "docling-mcp"


def test_selection_falls_back_to_per_format_and_fails_with_e305() -> None:
    settings = ProfileSettings()
    assert select_profile(PER_FORMAT_TOOLS, ["md", "html"], settings).name == "per-format"
    with pytest.raises(MissingCapability, match="fit no profile"):
        select_profile({"echo", "add"}, ["md"], settings)
    with pytest.raises(MissingCapability, match="docling-mcp cannot give pdf"):
        select_profile(DOCLING_TOOLS, ["pdf"], settings)
    forced = ProfileSettings(profile="per-format")
    with pytest.raises(MissingCapability):
        select_profile(DOCLING_TOOLS, ["md"], forced)


def per_format_client() -> ScriptedClient:
    document = {"schema_name": "DoclingDocument", "name": "a"}
    return ScriptedClient(
        {
            "convert_docx": lambda a: ok({"document": document}),
            "convert_url": lambda a: ok({"document": document}),
            "export_markdown": lambda a: ok({"markdown": f"# {a['document']['name']}"}),
            "export_html": lambda a: ok({"html": "<h1>a</h1>"}),
            "export_json": lambda a: ok({"json": a["document"]}),
        }
    )


def test_per_format_picks_the_tool_by_type_and_exports_each_format() -> None:
    client = per_format_client()
    profile = PerFormatProfile(PER_FORMAT_TOOLS)
    out = profile.convert(ToolCalls(client), request("md", "html", "json"))
    assert client.names() == ["convert_docx", "export_markdown", "export_html", "export_json"]
    assert client.calls[0][1] == {"file_path": "/in/a.docx"}
    assert out.outputs["md"] == "# a"
    assert out.outputs["html"] == "<h1>a</h1>"
    assert json.loads(out.outputs["json"])["schema_name"] == "DoclingDocument"


def test_per_format_url_and_unsupported_type() -> None:
    client = per_format_client()
    profile = PerFormatProfile(PER_FORMAT_TOOLS)
    url = ConversionRequest(source="https://x/a", kind="url", suffix="", formats=("md",))
    profile.convert(ToolCalls(client), url)
    assert client.calls[0] == ("convert_url", {"url": "https://x/a"})
    with pytest.raises(MissingCapability, match=r"\.html"):
        profile.convert(ToolCalls(client), request("md", suffix=".html"))


def test_per_format_export_error_is_e307() -> None:
    client = per_format_client()
    client.handlers["export_markdown"] = lambda a: failed("bad document")
    with pytest.raises(ExportFailed, match="bad document"):
        PerFormatProfile(PER_FORMAT_TOOLS).convert(ToolCalls(client), request("md"))


# ---- batches: which key is whose --------------------------------------------------------------
def test_batch_proof_needs_the_content_not_only_the_name(tmp_path: Path) -> None:
    """A cache hit answers the document converted first, whose origin names the file it had
    then. Here ``a.docx`` (content X) was converted before; now ``b.docx`` has content X and a
    new ``a.docx`` has content Y. Both keys' JSON name ``a.docx``: by name alone, ``a.docx``'s
    job got X's document whenever X's key came first. The content hash decides. (A third member
    the server skipped keeps elimination out: test_batch_proof.py has that case.)"""
    import hashlib

    from pipeline.profiles.docling_batch import (
        CONVERT_DIRECTORY,
        BatchMember,
        DoclingBatchProfile,
        binary_hash,
    )

    sha = {"X": hashlib.sha256(b"X").hexdigest(), "Y": hashlib.sha256(b"Y").hexdigest()}
    origins = {"key-X": ("a.docx", sha["X"]), "key-Y": ("a.docx", sha["Y"])}
    cache_dir = tmp_path / "cache"
    cache_dir.mkdir()

    def save(args: dict[str, Any]) -> Result:
        key = args["document_key"]
        filename, content = origins[key]
        json_file = cache_dir / f"{key}.json"
        origin = {"filename": filename, "binary_hash": binary_hash(content)}
        json_file.write_text(json.dumps({"origin": origin}))
        return ok({"md_file": str(cache_dir / f"{key}.md"), "json_file": str(json_file)})

    members = [BatchMember("a.docx", 1, sha["Y"]), BatchMember("b.docx", 1, sha["X"])]
    members.append(BatchMember("c.docx", 1, hashlib.sha256(b"Z").hexdigest()))  # skipped
    for keys in (["key-X", "key-Y"], ["key-Y", "key-X"]):  # either listing order
        client = ScriptedClient(
            {
                CONVERT_DIRECTORY: lambda a, keys=keys: ok(
                    {"result": [{"from_cache": k == "key-X", "document_key": k} for k in keys]}
                ),
                EXPORT_MARKDOWN: lambda a: ok({"markdown": f"# {a['document_key']}"}),
                SAVE: save,
                CHECK_CACHE: lambda a: ok({"in_cache": True}),
            }
        )
        single = DoclingMcpProfile.for_tools(DOCLING_TOOLS, server_cache_dir=cache_dir)
        batch = DoclingBatchProfile(single).convert(
            client, "/srv/batch", members, ("md",), lambda record, name: None, timeout=10
        )
        assert batch.converted["a.docx"].outputs == {"md": "# key-Y"}, keys
        assert batch.converted["a.docx"].document_key == "key-Y"
        assert batch.unproven == ["b.docx", "c.docx"]  # b's key proves nothing: alone


def test_batch_proof_by_name_still_works_without_a_content_hash(tmp_path: Path) -> None:
    """Callers that know no sha256 keep the name-only proof (as before)."""
    from pipeline.profiles.docling_batch import CONVERT_DIRECTORY, BatchMember, DoclingBatchProfile

    cache_dir = tmp_path / "cache"
    cache_dir.mkdir()

    def save(args: dict[str, Any]) -> Result:
        json_file = cache_dir / "k.json"
        json_file.write_text(json.dumps({"origin": {"filename": "a.docx", "binary_hash": 1}}))
        return ok({"md_file": str(cache_dir / "k.md"), "json_file": str(json_file)})

    client = ScriptedClient(
        {
            CONVERT_DIRECTORY: lambda a: ok(
                {"result": [{"from_cache": False, "document_key": "k"}]}
            ),
            EXPORT_MARKDOWN: lambda a: ok({"markdown": "# k"}),
            SAVE: save,
            CHECK_CACHE: lambda a: ok({"in_cache": True}),
        }
    )
    single = DoclingMcpProfile.for_tools(DOCLING_TOOLS, server_cache_dir=cache_dir)
    batch = DoclingBatchProfile(single).convert(
        client, "/srv/batch", [BatchMember("a.docx", 1)], ("md",), lambda r, n: None, timeout=10
    )
    assert batch.converted["a.docx"].outputs == {"md": "# k"} and batch.unproven == []


def test_batch_proof_falls_back_to_the_name_when_the_hash_is_no_members_content(
    tmp_path: Path,
) -> None:
    """Docling hashes Markdown after rendering it to HTML: the hash matches no file at all."""
    import hashlib

    from pipeline.profiles.docling_batch import CONVERT_DIRECTORY, BatchMember, DoclingBatchProfile

    cache_dir = tmp_path / "cache"
    cache_dir.mkdir()

    def save(args: dict[str, Any]) -> Result:
        json_file = cache_dir / "k.json"
        origin = {"filename": "a.md", "binary_hash": 12345, "mimetype": "text/html"}
        json_file.write_text(json.dumps({"origin": origin}))
        return ok({"md_file": str(cache_dir / "k.md"), "json_file": str(json_file)})

    client = ScriptedClient(
        {
            CONVERT_DIRECTORY: lambda a: ok(
                {"result": [{"from_cache": False, "document_key": "k"}]}
            ),
            EXPORT_MARKDOWN: lambda a: ok({"markdown": "# k"}),
            SAVE: save,
            CHECK_CACHE: lambda a: ok({"in_cache": True}),
        }
    )
    members = [BatchMember("a.md", 1, hashlib.sha256(b"# a").hexdigest())]
    single = DoclingMcpProfile.for_tools(DOCLING_TOOLS, server_cache_dir=cache_dir)
    batch = DoclingBatchProfile(single).convert(
        client, "/srv/batch", members, ("md",), lambda r, n: None, timeout=10
    )
    assert batch.converted["a.md"].outputs == {"md": "# k"} and batch.unproven == []
