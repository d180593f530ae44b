"""``doclane mcp tools|ping|call`` against the fake server."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from pipeline.cli import app
from tests.fixtures.fake_server import FakeServer
from tests.support.mcp_clients import CONVERT, EXPORT, REPO_ROOT

runner = CliRunner()


def doclane(*args: str) -> tuple[int, str, str]:
    result = runner.invoke(app, list(args))
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.stdout, result.stderr


def json_lines(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def test_tools_json(fake_server: FakeServer) -> None:
    code, out, _ = doclane("mcp", "tools", "--origin", fake_server.origin, "--json")
    assert code == 0
    (report,) = json_lines(out)
    assert report["ok"] is True and report["endpoint"] == fake_server.url
    assert len(report["tools"]) == 21
    assert report["server"]["protocol_version"] == "2025-11-25"
    assert fake_server.stats()["deletes"] == 1  # the CLI ends its session


def test_tools_text(fake_server: FakeServer) -> None:
    code, out, _ = doclane("mcp", "tools", "--origin", fake_server.url)
    assert code == 0 and "21 tools" in out and CONVERT in out


def test_ping_json_with_trail(fake_server: FakeServer) -> None:
    code, out, _ = doclane("mcp", "ping", "--origin", fake_server.url, "--json", "--trail")
    assert code == 0
    (report,) = json_lines(out)
    assert report["ok"] is True and report["latency_s"] > 0
    assert fake_server.stats()["requests_by_method"]["ping"] == 1  # the latency is a round trip
    assert [step["to"] for step in report["trail"]] == ["initializing", "ready"]


def test_origin_defaults_to_the_environment(
    fake_server: FakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DOCLING_MCP_ORIGIN", fake_server.origin)
    code, out, _ = doclane("mcp", "ping")
    assert code == 0 and "pong" in out


def test_call_prints_the_result(fake_server: FakeServer, docx: str) -> None:
    arguments = json.dumps({"source": docx})
    code, out, _ = doclane("mcp", "call", CONVERT, "--args", arguments, "--size-bytes", "40000",
                           "--origin", fake_server.url, "--json")  # fmt: skip
    assert code == 0
    (line,) = json_lines(out)
    assert line["ok"] is True and line["latency_s"] > 0
    assert len(line["result"]["structured"]["document_key"]) == 32


def test_call_repeat_over_one_session(
    fake_server: FakeServer, docx: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DOCLANE_RETRY_MAX_TRIES", "1")  # show each failure, do not retry it
    fake_server.configure(fail_next=1, fail_with="http503")
    code, out, _ = doclane("mcp", "call", CONVERT, "--args", json.dumps({"source": docx}),
                           "--repeat", "3", "--origin", fake_server.url, "--json")  # fmt: skip
    assert code == 1  # one of the three failed
    lines = json_lines(out)
    assert [line["n"] for line in lines] == [1, 2, 3]
    assert [line["ok"] for line in lines] == [False, True, True]
    assert lines[0]["error"]["code"] == "E302" and lines[0]["error"]["retryable"] is True
    assert all(line["latency_s"] > 0 for line in lines)
    stats = fake_server.stats()
    assert stats["initialize_calls"] == 1 and len(stats["session_ids_seen"]) == 1
    assert stats["requests_by_method"]["tools/call"] == 3  # one call a line, the failed one too


def test_an_isError_result_is_an_error(fake_server: FakeServer, tmp_path: Path) -> None:
    missing = str(tmp_path / "missing.docx")
    code, out, _ = doclane("mcp", "call", CONVERT, "--args", json.dumps({"source": missing}),
                           "--origin", fake_server.url, "--json")  # fmt: skip
    assert code == 1
    (line,) = json_lines(out)
    assert line["ok"] is False
    assert line["error"]["code"] == "E306"
    assert line["error"]["message"] == f"Error executing tool {CONVERT}"


def test_a_failed_export_is_E307(fake_server: FakeServer) -> None:
    code, out, _ = doclane("mcp", "call", EXPORT, "--args", '{"document_key": "nope"}',
                           "--origin", fake_server.url, "--json")  # fmt: skip
    assert code == 1 and json_lines(out)[0]["error"]["code"] == "E307"


def test_bad_arguments_are_E203_before_any_call(fake_server: FakeServer) -> None:
    code, out, _ = doclane("mcp", "call", CONVERT, "--args", '{"sorce": "x"}',
                           "--origin", fake_server.url, "--json")  # fmt: skip
    assert code == 1
    assert json_lines(out)[0]["error"]["code"] == "E203"
    assert fake_server.stats()["requests_by_tool"] == {}


def test_unreachable_server_json(fake_server: FakeServer) -> None:
    code, out, _ = doclane("mcp", "ping", "--origin", "http://127.0.0.1:1", "--json")
    assert code == 1
    assert json_lines(out) == [{"ok": False, "error": json_lines(out)[0]["error"]}]
    assert json_lines(out)[0]["error"]["code"] == "E302"


def test_args_must_be_a_json_object(fake_server: FakeServer) -> None:
    code, _, err = doclane("mcp", "call", CONVERT, "--args", "[1]", "--origin", fake_server.url)
    assert code == 2 and "JSON object" in err


def test_the_console_script(fake_server: FakeServer, docx: str) -> None:
    """The installed entry point, as an operator runs it."""
    proc = subprocess.run(
        [str(Path(sys.executable).with_name("doclane")), "mcp", "call", CONVERT,
         "--args", json.dumps({"source": docx}), "--origin", fake_server.url, "--json"],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert len(json.loads(proc.stdout)["result"]["structured"]["document_key"]) == 32


@pytest.mark.parametrize(
    ("environment", "rule"),
    [
        (
            {"DOCLING_MCP_AUTH": "bearer", "DOCLING_MCP_TOKEN": "cli-tok-81d0"},
            {"bearer": "cli-tok-81d0"},
        ),
        (
            {"DOCLING_MCP_AUTH": "api-key", "DOCLING_MCP_API_KEY": "cli-key-3c2a",
             "DOCLING_MCP_API_KEY_HEADER": "X-Docling-Key"},
            {"header": "X-Docling-Key", "value": "cli-key-3c2a"},
        ),
    ],
)  # fmt: skip
def test_credentials_from_the_environment(
    fake_server: FakeServer,
    monkeypatch: pytest.MonkeyPatch,
    environment: dict[str, str],
    rule: dict[str, str],
) -> None:
    fake_server.configure(require_auth=rule)
    code, out, _ = doclane("mcp", "ping", "--origin", fake_server.url, "--json")
    assert code == 1 and json_lines(out)[0]["error"]["code"] == "E310"
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    code, out, err = doclane("mcp", "ping", "--origin", fake_server.url, "--json", "--trail")
    assert code == 0, out + err
    secret = rule.get("bearer") or rule["value"]
    assert secret not in out + err


def console_call(origin: str, docx: str, **environment: str) -> subprocess.CompletedProcess[str]:
    """``doclane mcp call convert ... --size-bytes 10 --json`` as an operator runs it."""
    return subprocess.run(
        [str(Path(sys.executable).with_name("doclane")), "mcp", "call", CONVERT,
         "--args", json.dumps({"source": docx}), "--size-bytes", "10", "--origin", origin,
         "--json"],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=120, check=False,
        env={**os.environ, "DOCLANE_RETRY_MAX_TRIES": "1", **environment},
    )  # fmt: skip


def test_a_kept_alive_hang_is_E303_at_the_small_tier_deadline(
    fake_server: FakeServer, docx: str
) -> None:
    """A hang behind keep-alives every 0.2 s: each restarted the read timeout, so such a call
    used to be held forever; the deadline covers the whole exchange."""
    fake_server.configure(fail_next=1, fail_with="hang", keepalive_s=0.2)
    proc = console_call(fake_server.url, docx, DOCLANE_TIMEOUT_SMALL_S="3")
    assert proc.returncode == 1, proc.stderr
    error = json_lines(proc.stdout)[0]["error"]
    assert error["code"] == "E303" and "3s" in error["message"]
    stats = fake_server.stats()
    assert stats["keepalives_sent"] >= 1
    assert len(stats["cancelled"]) == 1 and "3s" in stats["cancelled"][0]["reason"]


def test_a_trickled_json_reply_is_E303_at_the_deadline(fake_server_factory: Any, docx: str) -> None:
    server = fake_server_factory(json_response=True)
    server.configure(trickle_s=0.3)
    proc = console_call(server.url, docx, DOCLANE_TIMEOUT_SMALL_S="3")
    assert proc.returncode == 1, proc.stderr
    assert json_lines(proc.stdout)[0]["error"]["code"] == "E303"
    assert server.stats()["trickled_bytes"] >= 1


def test_a_300_MB_reply_is_E312_under_a_10_MiB_bound(fake_server: FakeServer, docx: str) -> None:
    fake_server.configure(oversize_reply_bytes=300_000_000)
    proc = console_call(fake_server.url, docx, DOCLANE_MCP_MAX_REPLY_BYTES="10485760")
    assert proc.returncode == 1, proc.stderr
    error = json_lines(proc.stdout)[0]["error"]
    assert error["code"] == "E312" and "10485760" in error["message"]
    assert error["retryable"] is False
