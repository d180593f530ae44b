"""JSON Schema checks of tool arguments (before sending: E203) and structured output (E311).

Docling tools fail with almost no text (``Error executing tool ...``), so a wrong argument must
be caught here, where the message can say which field is wrong. Schemas come from the server;
one that is itself invalid is logged and not enforced rather than making the tool unusable.
Formats (``"format": "uri"``) are annotations only, as in the JSON Schema default: the server
decides what it accepts.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from jsonschema import exceptions as schema_errors
from jsonschema import validators
from jsonschema.protocols import Validator

from errors import InvalidParams, OutputSchemaMismatch

logger = logging.getLogger("doclane.mcp.schemas")


def compile_schema(schema: Mapping[str, Any] | None, what: str) -> Validator | None:
    """A validator for ``schema`` (its ``$schema`` dialect, else 2020-12), or None."""
    if schema is None:
        return None
    plain = dict(schema)
    cls = validators.validator_for(plain, default=validators.Draft202012Validator)
    try:
        cls.check_schema(plain)
    except schema_errors.SchemaError as exc:
        logger.warning("%s: the server's schema is invalid and is not enforced: %s", what, exc)
        return None
    return cls(plain)


def check_arguments(validator: Validator | None, tool: str, arguments: Mapping[str, Any]) -> None:
    """Raise E203 naming the first (most relevant) wrong field."""
    if validator is None:
        return
    error = schema_errors.best_match(validator.iter_errors(dict(arguments)))
    if error is None:
        return
    field = _field_of(error)
    if error.validator == "required" and field:
        problem = f"missing required argument {field!r}"
    elif field:
        problem = f"argument {field!r}: {error.message}"
    else:
        problem = f"arguments: {error.message}"
    raise InvalidParams(
        f"{tool}: {problem}",
        detail={"tool": tool, "field": field, "rule": str(error.validator)},
    )


def check_output(validator: Validator | None, tool: str, structured: Any) -> None:
    """Raise E311 when ``structuredContent`` breaks the tool's ``outputSchema``."""
    if validator is None:
        return
    if structured is None:
        raise OutputSchemaMismatch(
            f"{tool}: declares an outputSchema but returned no structuredContent",
            detail={"tool": tool},
        )
    error = schema_errors.best_match(validator.iter_errors(structured))
    if error is None:
        return
    field = _field_of(error)
    where = f"field {field!r}" if field else "structuredContent"
    raise OutputSchemaMismatch(
        f"{tool}: {where}: {error.message}",
        detail={"tool": tool, "field": field, "rule": str(error.validator)},
    )


def _field_of(error: schema_errors.ValidationError) -> str:
    """A dotted path to the offending field; for ``required`` the missing property itself."""
    path = [str(part) for part in error.absolute_path]
    required = error.validator_value
    if error.validator == "required" and isinstance(error.instance, Mapping):
        names = required if isinstance(required, list) else []
        missing = [name for name in names if isinstance(name, str) and name not in error.instance]
        if missing:
            path.append(missing[0])
    return ".".join(path)
