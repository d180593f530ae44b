"""A job's output formats: which exist, and the one value they travel as once parsed.

A submitter names formats as text (``--to md,json``, the API's ``to``, an upload's ``to``
field). Each door parses that text once into :class:`Formats`; everything after it (the
submission, the job's spec, the dedup key) takes a ``Formats`` as it is. Which of them a
server can give is its profile's business (``pipeline.profiles``), asked at submission by
``pipeline.submission.door``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Literal, get_args

from pydantic import GetCoreSchemaHandler, GetJsonSchemaHandler
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import core_schema

#: Output formats a job may ask for. ``text`` is plain text, ``chunks`` JSON chunk records
#: (text, headings, item references) for retrieval pipelines.
Format = Literal["md", "json", "html", "text", "chunks"]
KNOWN_FORMATS: frozenset[str] = frozenset(get_args(Format))

_ONE = "(" + "|".join(get_args(Format)) + ")"
#: The text :meth:`Formats.parse` takes, as the pattern the API's schema publishes.
FORMATS_PATTERN = rf"^\s*{_ONE}\s*(,\s*{_ONE}\s*)*$"


class Formats(tuple[str, ...]):
    """Known formats, lower-case, unique and sorted (so dedup finds ``md,json`` and
    ``json,md`` equal), at least one. Made by :meth:`parse`; a ``Formats`` is trusted as is."""

    __slots__ = ()

    @classmethod
    def parse(cls, value: str | Iterable[str]) -> Formats:
        """``"md, JSON"`` or ``["md", "json"]`` as ``Formats``; ``ValueError`` naming what is
        unknown, or when none is named."""
        if isinstance(value, Formats):
            return value
        names = value.split(",") if isinstance(value, str) else value
        cleaned = sorted({str(name).strip().lower() for name in names} - {""})
        if not cleaned:
            raise ValueError("at least one output format is required")
        unknown = [name for name in cleaned if name not in KNOWN_FORMATS]
        if unknown:
            raise ValueError(
                f"unknown output format(s): {', '.join(unknown)} "
                f"(known: {', '.join(sorted(KNOWN_FORMATS))})"
            )
        return cls(cleaned)

    @classmethod
    def from_stored(cls, names: Iterable[str]) -> Formats:
        """A job's formats as the store keeps them (:meth:`parse` made them): trusted."""
        return cls(names)

    def __str__(self) -> str:
        return ",".join(self)

    @classmethod
    def __get_pydantic_core_schema__(
        cls, source: Any, handler: GetCoreSchemaHandler
    ) -> core_schema.CoreSchema:
        """In a pydantic model: a ``Formats`` is kept, text or a list is parsed; dumped as a
        list of names."""
        return core_schema.no_info_plain_validator_function(
            cls.parse,
            serialization=core_schema.plain_serializer_function_ser_schema(list),
        )

    @classmethod
    def __get_pydantic_json_schema__(
        cls, schema: core_schema.CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        return {"type": "string", "pattern": FORMATS_PATTERN}


#: What a job converts to when its submitter names nothing.
DEFAULT_FORMATS = Formats(["md"])
