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
from collections.abc import Mapping
from typing import TYPE_CHECKING, Annotated, Any, Self, TypeVar

from pydantic import AliasChoices, BaseModel, BeforeValidator, ValidationError
from pydantic_core import ErrorDetails
from pydantic_settings import (
    DotEnvSettingsSource,
    EnvSettingsSource,
    NoDecode,
    SettingsConfigDict,
    SettingsError,
)

if TYPE_CHECKING:  # the catalog is loaded when a setting is wrong, not by every reading
    from errors import InvalidSetting

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
        (a script, a default where no composition root handed one down). A variable it cannot
        read is E120, naming the variable."""
        try:
            return cls.model_validate(environment_values(cls))
        except (ValidationError, SettingsError) as exc:
            raise invalid_setting(exc, {"": cls}) from None


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


def environment_names(section: type[BaseModel], name: str) -> tuple[str, ...]:
    """The environment variables a section's field is read from: the names its
    ``validation_alias`` gives (the upper-case ones), else the section's prefix and its name."""
    field = section.model_fields[name]
    alias = field.validation_alias
    if isinstance(alias, AliasChoices):
        return tuple(str(c) for c in alias.choices if str(c).isupper())
    if isinstance(alias, str):
        return (alias.upper(),)
    prefix = str(section.model_config.get("env_prefix", ""))
    return (f"{prefix}{name}".upper(),)


def invalid_setting(
    problem: ValidationError | SettingsError, sections: Mapping[str, type[BaseModel]]
) -> InvalidSetting:
    """pydantic's refusal of the environment as one catalog error (E120) that names each
    variable at fault and what it wants, never its value (a token list, a database URL).

    ``sections`` are the models validated, by the first part of an error's location: the
    tree's sections by name (``{"api": ApiSettings, ...}``), or ``{"": Section}`` for a
    section validated alone."""
    from errors import InvalidSetting

    if isinstance(problem, SettingsError):  # pydantic-settings could not decode a value
        return InvalidSetting(f"a setting could not be read: {problem}")
    faults = [_fault(error, sections) for error in problem.errors(include_input=False)]
    variables = sorted({variable for variable, _, _ in faults if variable})
    shown = "; ".join(
        dict.fromkeys(
            f"{variable}{where}: {why}" if variable else why for variable, where, why in faults
        )
    )
    return InvalidSetting(shown, detail={"variables": variables})


def _fault(error: ErrorDetails, sections: Mapping[str, type[BaseModel]]) -> tuple[str, str, str]:
    """(the variable, where in its value, what is wrong) of one of pydantic's errors; no
    variable when the error is a section's own (two settings that disagree, whose message
    names them)."""
    why = error["msg"].removeprefix("Value error, ").removeprefix("Assertion failed, ")
    loc = list(error["loc"])
    section: type[BaseModel] | None = sections.get("")
    if section is None and loc and isinstance(loc[0], str):
        section = sections.get(str(loc.pop(0)))
    if section is None or not loc or not isinstance(loc[0], str):
        return "", "", why
    key = str(loc.pop(0))
    where = "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in loc)
    if key in section.model_fields:
        variable = " or ".join(environment_names(section, key))
    else:  # given by an alias: the variable's own name
        variable = key.upper()
    return variable, where, why
