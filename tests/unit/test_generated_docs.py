"""docs/errors.md and docs/configuration.md say what the code says (python scripts/docsgen.py).

The committed pages must equal a fresh rendering, and the rendering must come from the code:
a catalog entry or a settings field that exists only in a test shows up in it.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Literal

import pytest
from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from errors import CATALOG, CatalogEntry
from tests.fixtures.scripts import load_script
from tests.support.settings_tree import environment_names, settings_classes

ROOT = Path(__file__).resolve().parents[2]
DOCSGEN_PATH = ROOT / "scripts" / "docsgen.py"


docsgen = load_script("docsgen")


@pytest.mark.parametrize("name", ["errors.md", "configuration.md"])
def test_committed_page_matches_the_code(name: str) -> None:
    page = ROOT / "docs" / name
    rendered = docsgen.pages()[page]
    assert page.read_text() == rendered, f"docs/{name} is stale: run {docsgen.COMMAND}"


def test_every_catalog_code_is_on_the_errors_page() -> None:
    text = (ROOT / "docs" / "errors.md").read_text()
    for code, entry in CATALOG.items():
        row = next((line for line in text.splitlines() if line.startswith(f"| {code} |")), None)
        assert row, f"{code} missing from docs/errors.md"
        flags = (
            f"| {'yes' if entry.retryable else 'no'} | {'yes' if entry.trips_breaker else 'no'} |"
        )
        assert flags in row and entry.action.split()[0] in row, row


def test_every_setting_is_on_the_configuration_page_with_a_meaning() -> None:
    text = (ROOT / "docs" / "configuration.md").read_text()
    rows = {line.split("|")[1]: line for line in text.splitlines() if line.startswith("| `")}
    for cls in settings_classes():
        for name in environment_names(cls):
            row = next((r for cell, r in rows.items() if f"`{name}`" in cell), None)
            assert row, f"{name} ({cls.__name__}) missing from docs/configuration.md"
            assert "(undocumented)" not in row, f"say what {name} means: a #: comment"


def test_errors_page_is_rendered_from_the_catalog_it_is_given() -> None:
    extra = CatalogEntry("E312", "reply too large", "Too big.", "Raise the limit.", False)
    text = docsgen.render_errors([*CATALOG.values(), extra])
    assert "| E312 | reply too large | no | no | Too big. | Raise the limit. |" in text


class ProbeSettings(BaseSettings):
    """Settings that exist only in this test."""

    model_config = SettingsConfigDict(env_prefix="DOCLANE_PROBE_")

    #: How far the probe reaches.
    reach_s: float = 2.5
    label: str = Field(default="", description="What the probe is called.")
    mode: Literal["near", "far"] = "near"


def test_configuration_page_renders_the_classes_it_is_given_with_their_meanings() -> None:
    text = docsgen.render_configuration([ProbeSettings])
    assert f"## ProbeSettings (`{__name__}`)" in text
    assert "Settings that exist only in this test." in text
    assert "| `DOCLANE_PROBE_REACH_S` | `2.5` | How far the probe reaches. |" in text
    assert "| `DOCLANE_PROBE_LABEL` | (empty) | What the probe is called. |" in text
    assert "| `DOCLANE_PROBE_MODE` | `near` | (undocumented) One of: `near`, `far`. |" in text


def test_configuration_page_covers_every_section_of_the_settings_tree() -> None:
    """Found in the tree, as .env.example's own test finds them."""
    found = docsgen.settings_classes()
    assert set(found) == set(settings_classes())
    assert ProbeSettings not in found  # no section of the tree


def test_check_command_fails_on_a_stale_page_and_rewrites_it(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "errors.md").write_text("stale\n")

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, str(DOCSGEN_PATH), "--docs-dir", str(docs), *args],
            capture_output=True,
            text=True,
            check=False,
            timeout=120,
        )

    stale = run("--check")
    assert stale.returncode == 1 and "errors.md" in stale.stderr
    assert run().returncode == 0
    assert run("--check").returncode == 0
    assert (docs / "configuration.md").read_text() == (ROOT / "docs/configuration.md").read_text()
