"""The settings tree's sections and the environment names each reads."""

from __future__ import annotations

from pydantic import AliasChoices

from pipeline.settings.tree import Settings
from pipeline.support.settings import Section


def settings_classes() -> list[type[Section]]:
    """Every section of the settings tree: the tree is the one place settings are read."""
    return list(Settings.sections().values())


def environment_names(cls: type[Section]) -> set[str]:
    prefix = str(cls.model_config.get("env_prefix", ""))
    names = set()
    for name, field in cls.model_fields.items():
        alias = field.validation_alias
        if isinstance(alias, AliasChoices):
            names.update(str(c) for c in alias.choices if str(c).isupper())
        else:
            names.add(f"{prefix}{name}".upper())
    return names
