"""What a component's settings are made of: a :class:`Section` of the one settings tree
(``pipeline.settings``), and :data:`CommaList`, the one way a list is written in a variable.

A section is a plain pydantic model: it reads nothing by itself. The tree reads the environment
(and ``.env``) once per process and hands each component its section, so a section built in
code (``StoreSettings(database_url=...)``) is exactly what it says, whatever the environment
holds. A section's fields are read from ``DOCLANE_<FIELD>`` unless a field names its variables
itself (``validation_alias``); a section may change that prefix, or whether an empty variable
means the default, in its own ``model_config``.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Self, TypeVar

from pydantic import BaseModel, BeforeValidator
from pydantic_settings import DotEnvSettingsSource, EnvSettingsSource, NoDecode, SettingsConfigDict

T = TypeVar("T")


class Section(BaseModel):
    """One component's settings: frozen, unknown names ignored, fields settable by name."""

    # env_prefix and env_ignore_empty are read by the tree's source, not by pydantic: an empty
    # variable means the default (.env.example lists DOCLANE_MIGRATIONS_DIR= and the like).
    model_config = SettingsConfigDict(
        env_prefix="DOCLANE_",
        env_ignore_empty=True,
        extra="ignore",
        frozen=True,
        populate_by_name=True,
        validate_default=True,
    )

    @classmethod
    def from_environment(cls) -> Self:
        """This section alone, read as the tree reads it: for a part used without a tree
        (a script, a default where no composition root handed one down)."""
        return cls.model_validate(environment_values(cls))


def split_commas(value: Any) -> Any:
    """``"a, b,,c"`` -> ``["a", "b", "c"]``; ``'["a", "b"]'`` (JSON) -> ``["a", "b"]``; a list or
    tuple is kept as it is, for a section built in code."""
    if not isinstance(value, str):
        return value
    text = value.strip()
    if text.startswith("["):
        return json.loads(text)
    return [part.strip() for part in text.split(",") if part.strip()]


#: A list read from one variable: comma-separated, or a JSON list; each item then validates as
#: ``T`` (a string it is given is the item's own text, stripped).
CommaList = Annotated[tuple[T, ...], NoDecode, BeforeValidator(split_commas)]


#: The file read besides the environment, in the working directory; the environment wins.
ENV_FILE = ".env"


def environment_values(section: type[Section], env_file: str | None = ENV_FILE) -> dict[str, Any]:
    """What the environment and ``env_file`` say of ``section``'s fields, by field name, not yet
    validated: pydantic-settings' own sources, run over one section."""
    # The sources take the section's model_config (prefix, empty values) as a settings class's.
    cls: Any = section
    values = DotEnvSettingsSource(cls, env_file=env_file)() if env_file else {}
    return {**values, **EnvSettingsSource(cls)()}
