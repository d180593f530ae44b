"""Write ``doclane_client/models.py`` from the API's OpenAPI document.

The client's models are not written by hand: each schema of the document's
``components.schemas`` becomes a pydantic model (or a ``StrEnum``), field for field, in an order
where every model follows the ones it names. ``tests/client/test_openapi_drift.py`` renders the
running API's document again and fails when the committed file differs, so a field the API adds,
drops or retypes shows up as a failing test rather than as a client that quietly misreads it.

    python clients/python/scripts/generate_models.py               # from the app, in-process
    python clients/python/scripts/generate_models.py --schema x.json

The models allow fields they do not know (``extra="allow"``): a client older than the server it
talks to keeps working, and the drift test is where the difference is caught.
"""

from __future__ import annotations

import argparse
import json
import keyword
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

TARGET = Path(__file__).resolve().parents[1] / "doclane_client" / "models.py"

_HEADER = '''"""The API's models, generated from its OpenAPI document: do not edit by hand.

Written by ``clients/python/scripts/generate_models.py`` (API version {version}); the test
``tests/client/test_openapi_drift.py`` fails when this file and the API's document differ.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any
from uuid import UUID

from pydantic import BaseModel, ConfigDict, Field


class ApiModel(BaseModel):
    """Every model: fields a newer API adds are kept, not refused."""

    model_config = ConfigDict(extra="allow")
'''

_SCALARS = {"integer": "int", "number": "float", "boolean": "bool"}
_STRING_FORMATS = {"uuid": "UUID", "date-time": "datetime"}


def render(document: dict[str, Any]) -> str:
    """The module's text for ``document`` (an OpenAPI 3.1 document FastAPI wrote)."""
    schemas: dict[str, dict[str, Any]] = document["components"]["schemas"]
    parts = [_HEADER.format(version=document["info"]["version"])]
    for name in _ordered(schemas):
        schema = schemas[name]
        parts.append(_enum(name, schema) if "enum" in schema else _model(name, schema))
    return _formatted("\n\n".join(parts).rstrip() + "\n")


def _formatted(text: str) -> str:
    """``text`` as ``ruff format`` leaves it (the project's formatter, beside this Python), so
    the committed file passes the format check and the drift test compares like with like."""
    beside = Path(sys.executable).with_name("ruff")
    ruff = str(beside) if beside.exists() else "ruff"
    done = subprocess.run(
        [ruff, "format", "--stdin-filename", str(TARGET), "-"],
        input=text,
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout


def _ordered(schemas: dict[str, dict[str, Any]]) -> list[str]:
    """Names sorted, each after the schemas it refers to (so no forward reference is left)."""
    done: list[str] = []

    def visit(name: str) -> None:
        if name in done:
            return
        done.append(name)  # a cycle stops here; pydantic resolves it through the module
        for ref in sorted(_refs(schemas[name])):
            visit(ref)
        done.remove(name)
        done.append(name)

    for name in sorted(schemas):
        visit(name)
    return done


def _refs(schema: Any) -> set[str]:
    if isinstance(schema, dict):
        found = {schema["$ref"].rsplit("/", 1)[-1]} if "$ref" in schema else set()
        for value in schema.values():
            found |= _refs(value)
        return found
    if isinstance(schema, list):
        return set().union(*map(_refs, schema)) if schema else set()
    return set()


def _enum(name: str, schema: dict[str, Any]) -> str:
    lines = [f"class {name}(StrEnum):", *_docstring(schema)]
    for value in schema["enum"]:
        lines.append(f"    {_identifier(str(value).upper())} = {json.dumps(value)}")
    return "\n".join(lines) + "\n"


def _model(name: str, schema: dict[str, Any]) -> str:
    lines = [f"class {name}(ApiModel):", *_docstring(schema)]
    required = set(schema.get("required", []))
    properties: dict[str, Any] = schema.get("properties", {})
    for field, spec in properties.items():
        annotation = _type(spec)
        if field in required:
            lines.append(f"    {field}: {annotation}")
        elif "default" in spec:
            default = spec["default"]
            if isinstance(default, list | dict):
                lines.append(
                    f"    {field}: {annotation} = Field(default_factory=lambda: {default!r})"
                )
            else:
                lines.append(f"    {field}: {annotation} = {default!r}")
        else:
            lines.append(f"    {field}: {annotation} = None")
    if not properties:
        lines.append("    pass")
    return "\n".join(lines) + "\n"


def _docstring(schema: dict[str, Any]) -> list[str]:
    """The schema's description as the class's docstring, wrapped to the project's 100
    columns (room left on the last line for the closing quotes)."""
    text = " ".join(str(schema.get("description", "")).split())
    if not text:
        return []
    wrapped = textwrap.wrap(text, width=97, initial_indent='    """', subsequent_indent="    ")
    wrapped[-1] += '"""'
    return [*wrapped, ""]


def _type(spec: dict[str, Any]) -> str:
    if "$ref" in spec:
        return str(spec["$ref"].rsplit("/", 1)[-1])
    if "anyOf" in spec:
        names = [_type(option) for option in spec["anyOf"]]
        return " | ".join(dict.fromkeys(names))
    kind = spec.get("type")
    if kind == "null":
        return "None"
    if kind == "string":
        return _STRING_FORMATS.get(spec.get("format", ""), "str")
    if kind in _SCALARS:
        return _SCALARS[kind]
    if kind == "array":
        return f"list[{_type(spec.get('items', {}))}]"
    if kind == "object":
        extra = spec.get("additionalProperties", True)
        return f"dict[str, {'Any' if extra is True else _type(extra)}]"
    return "Any"


def _identifier(text: str) -> str:
    name = "".join(c if c.isalnum() else "_" for c in text)
    return f"{name}_" if keyword.iskeyword(name) or name[:1].isdigit() else name


def app_document() -> dict[str, Any]:
    """The API's document, from the app itself (no database is asked: the schema is static)."""
    from pipeline.api.app import create_app
    from pipeline.api.context import ApiContext
    from pipeline.settings.tree import read_settings
    from pipeline.store.store import JobStore

    tree = read_settings()
    store = JobStore(tree.store)
    try:
        document: dict[str, Any] = create_app(
            ApiContext(tree, store, publisher=None, fleet=None)  # type: ignore[arg-type]
        ).openapi()
        return document
    finally:
        store.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--schema", type=Path, help="an OpenAPI JSON file (default: the app's)")
    parser.add_argument("--check", action="store_true", help="exit 1 if the file would change")
    args = parser.parse_args(argv)
    document = json.loads(args.schema.read_text()) if args.schema else app_document()
    text = render(document)
    if args.check:
        stale = not TARGET.exists() or TARGET.read_text() != text
        print(f"{TARGET} is {'stale' if stale else 'up to date'}")
        return 1 if stale else 0
    TARGET.write_text(text)
    print(f"wrote {TARGET}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
