"""The ``origin`` of a Docling JSON file, read without reading (or parsing) the whole file.

A batch's keys are proven by the ``origin`` of each document's saved JSON
(:mod:`pipeline.profiles.docling_batch`). docling writes ``schema_name``, ``version``, ``name``
and then ``origin``, a few hundred bytes in, while the whole file of a table can be tens of
megabytes: measured on the real-world corpus, parsing every whole file took 0.95 s of worker
time against 0.015 s for the origins alone (bench/investigations/proof_cost.py), and a file
larger than ``DOCLANE_MCP_MAX_REPLY_BYTES`` could not prove anything at all.
"""

from __future__ import annotations

import codecs
import json
from pathlib import Path
from typing import Any

_FIRST_READ = 16 * 1024


def read_origin(path: Path, *, limit: int) -> Any:
    """The top-level ``origin`` of a saved Docling JSON, reading only as far as it lies.

    The prefix is walked as JSON, key by key at the top level (a string that merely contains
    ``"origin"`` cannot fool it), doubling what is read until ``origin`` is complete. None: no
    top-level origin within ``limit`` bytes, or not JSON.
    """
    wanted, read = _FIRST_READ, 0
    decoder = codecs.getincrementaldecoder("utf-8")(errors="strict")
    text = ""
    with path.open("rb") as handle:
        while True:
            chunk = handle.read(max(0, min(wanted, limit + 1) - read))
            read += len(chunk)
            at_end = not chunk or read > limit
            try:
                text += decoder.decode(chunk, final=not chunk)
            except UnicodeDecodeError:
                return None
            found, complete = _top_level_value(text, "origin")
            if complete or at_end:
                return found
            wanted *= 2


_WHITESPACE = " \t\n\r"
_DECODER = json.JSONDecoder()


def _top_level_value(text: str, wanted: str) -> tuple[Any, bool]:
    """``(value, True)`` when the object in ``text`` has top-level key ``wanted`` complete,
    ``(None, True)`` when it is certain it has none (or is no JSON object), ``(None, False)``
    when ``text`` ends before that is known."""
    pos = _skip(text, 0)
    if pos >= len(text):
        return None, False
    if text[pos] != "{":
        return None, True
    pos += 1
    try:
        while True:
            pos = _skip(text, pos)
            if text[pos] == "}":
                return None, True
            key, pos = _DECODER.raw_decode(text, pos)
            pos = _skip(text, pos)
            if text[pos] != ":":
                return None, True
            value, pos = _DECODER.raw_decode(text, _skip(text, pos + 1))
            pos = _skip(text, pos)
            if text[pos] not in ",}":  # also proves a number was not cut short
                return None, True
            if key == wanted:
                return value, True
            pos += 1 if text[pos] == "," else 0
    except (IndexError, ValueError):
        return None, False  # the text ends inside a value (or is no JSON: read on to know)


def _skip(text: str, pos: int) -> int:
    while pos < len(text) and text[pos] in _WHITESPACE:
        pos += 1
    return pos
