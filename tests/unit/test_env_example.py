""".env.example lists every setting doclane reads, so operators never have to read code."""

from __future__ import annotations

import importlib
import pkgutil
import re
from pathlib import Path

from pydantic import AliasChoices
from pydantic_settings import BaseSettings

import pipeline
import workers

ROOT = Path(__file__).resolve().parents[2]


def settings_classes() -> list[type[BaseSettings]]:
    # Settings classes live in *.settings modules and beside their component (joblog,
    # reconcile): import every module, so the answer does not depend on what ran before.
    for package in (pipeline, workers):
        for module in pkgutil.walk_packages(package.__path__, f"{package.__name__}."):
            if not module.name.endswith("__main__"):
                importlib.import_module(module.name)
    found: list[type[BaseSettings]] = []
    pending = list(BaseSettings.__subclasses__())
    while pending:
        cls = pending.pop()
        pending.extend(cls.__subclasses__())
        if cls.__module__.startswith(("pipeline.", "workers.")):
            found.append(cls)
    return found


def environment_names(cls: type[BaseSettings]) -> set[str]:
    prefix = str(cls.model_config.get("env_prefix", ""))
    names = set()
    for name, field in cls.model_fields.items():
        alias = field.validation_alias
        if isinstance(alias, AliasChoices):
            names.update(str(c) for c in alias.choices if str(c).isupper())
        else:
            names.add(f"{prefix}{name}".upper())
    return names


def test_every_setting_is_in_env_example() -> None:
    listed = set(re.findall(r"^([A-Z][A-Z0-9_]+)=", (ROOT / ".env.example").read_text(), re.M))
    classes = settings_classes()
    assert len(classes) >= 4
    missing = {name for cls in classes for name in environment_names(cls)} - listed
    assert not missing, f"add to .env.example: {sorted(missing)}"
