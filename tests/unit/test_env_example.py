""".env.example lists every setting doclane reads, so operators never have to read code."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from pydantic import SecretStr

from tests.support.settings_tree import environment_names, settings_classes

ROOT = Path(__file__).resolve().parents[2]


def test_every_setting_is_in_env_example() -> None:
    listed = set(re.findall(r"^([A-Z][A-Z0-9_]+)=", (ROOT / ".env.example").read_text(), re.M))
    classes = settings_classes()
    assert len(classes) >= 4
    missing = {name for cls in classes for name in environment_names(cls)} - listed
    assert not missing, f"add to .env.example: {sorted(missing)}"


def _comparable(value: object) -> object:
    """A value as its meaning: an empty secret is no secret (McpSettings.secret reads it so)."""
    if isinstance(value, SecretStr):
        value = value.get_secret_value()
    return None if value == "" else value


def test_env_example_as_env_means_the_defaults(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """`cp .env.example .env` (as compose.yaml's env_file does) must change nothing.

    Each value listed must parse to the default it documents, and an empty value must mean the
    default, not an empty path or string (DOCLANE_MIGRATIONS_DIR= once meant ".").
    """
    listed = dict(
        re.findall(r"^([A-Z][A-Z0-9_]+)=(.*)$", (ROOT / ".env.example").read_text(), re.M)
    )
    monkeypatch.chdir(tmp_path)  # no developer's .env is read
    classes = settings_classes()
    for name in listed:
        monkeypatch.delenv(name, raising=False)
    defaults = {cls: cls() for cls in classes}
    for name, value in listed.items():
        monkeypatch.setenv(name, value)
    for cls in classes:
        loaded = cls.from_environment()
        for field in cls.model_fields:
            got, want = getattr(loaded, field), getattr(defaults[cls], field)
            assert _comparable(got) == _comparable(want), (
                f"{cls.__name__}.{field}: .env.example gives {got!r}, the default is {want!r}"
            )
