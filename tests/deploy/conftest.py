"""compose.yaml as docker-compose reads it, from a scratch copy with .env.example as .env.

Docker cannot run on the dev and CI machines; Compose itself can still parse, validate and
render the file (Debian's docker-compose 1.29, installed by scripts/test). The copy keeps the
check independent of any .env a developer has in the checkout.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.deploy_tools import ALL_PROFILES, ROOT, compose


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """compose.yaml, docker/ and .env.example (as .env) in a scratch project folder."""
    shutil.copy(ROOT / "compose.yaml", tmp_path / "compose.yaml")
    shutil.copytree(ROOT / "docker", tmp_path / "docker")
    shutil.copy(ROOT / ".env.example", tmp_path / ".env")
    return tmp_path


@pytest.fixture
def rendered(project: Path) -> dict[str, Any]:
    """docker-compose's own rendering of the file, every profile on: anchors merged, .env read."""
    args = [arg for profile in ALL_PROFILES for arg in ("--profile", profile)]
    result = compose(project, *args, "config")
    assert result.returncode == 0, result.stderr
    config: dict[str, Any] = yaml.safe_load(result.stdout)
    return config
