"""The repository root, the deployment tools and how the deploy tests run them."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


ALL_PROFILES = ("serve", "stdio", "tiers", "rs", "monitoring")


def run_tool(
    tool: str, *args: str, cwd: Path, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    """Run one of the deployment tools scripts/test installs (docker-compose, kubectl,
    promtool) in ``cwd``; its output as text, its status left to the caller."""
    binary = shutil.which(tool)
    assert binary, f"{tool} is missing: scripts/test installs it (scripts/lib.sh)"
    return subprocess.run(
        [binary, *args],
        input=stdin,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def compose(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Run docker-compose in ``project`` (no Docker daemon is needed for ``config``)."""
    return run_tool("docker-compose", *args, cwd=project)
