"""Large replies parsed as they arrive, with one copy of a result the server sends twice.

Parsed whole, a reply costs its bytes and everything ``json.loads`` builds from them. For a
50 MB markdown export that is the 105 MB reply, then both 50 MB copies of the markdown, since
the SDKs send a structured result twice: as ``structuredContent`` and as a text block holding
its JSON. A reply that grows past ``STREAM_AFTER`` bytes while it is read is fed instead, in
pieces of ``FEED_BYTES``, to ijson's yajl2 C parser, which builds each value when its last byte
arrives: the reply's bytes are never held whole. (yajl lexes an unfinished token again at
every feed, so pieces of 64 KiB cost seconds on a 50 MB string; pieces of 4 MiB a fraction of
one.) Replies under ``STREAM_AFTER``, nearly all, keep ``json.loads``.

A text block of a tool result longer than ``HOLD_CHARS`` is set aside until the message ends,
since only then is it known whether ``structuredContent`` repeats it. While it is aside, the
start of another long string on the wire has it compressed (the text and the string it may
repeat are never both held whole). At the end:

- when its text is exactly ``structuredContent`` as JSON (as ``json.dumps`` or pydantic's
  ``to_json`` write it: indented by 2, or on one line), the block goes: the result keeps
  ``structuredContent``, the copy every profile reads;
- when ``structuredContent`` is ``{"result": <that text>}`` (how the SDK wraps a tool's plain
  string), the block keeps its text, the very string ``structuredContent`` holds;
- otherwise (an error result, another text, another serialiser) the text is put back as it came.

So the values are those ``json.loads`` gives, less a text block that said nothing else.
"""

from __future__ import annotations

import hashlib
import json
import zlib
from collections.abc import Iterable, Iterator
from decimal import Decimal
from typing import Any

import ijson

JsonObject = dict[str, Any]
MIB = 1024 * 1024
#: A reply (a stdio line, a JSON body, an SSE event's data) longer than this is streamed.
STREAM_AFTER = 4 * MIB
#: What the parser is fed at a time (see the module docstring for why not less).
FEED_BYTES = 4 * MIB
#: A result's text block at least this long waits for the end of its message.
HOLD_CHARS = 1 * MIB
#: The slices a held text is hashed and compressed in (never encoded whole).
_SLICE = 1 * MIB
#: How many characters of a held text are kept as they are, to turn a serialisation down early.
_HEAD = 256
_STARTS = frozenset({"start_map", "start_array"})
_ENDS = frozenset({"end_map", "end_array"})


class LargeReplyParser:
    """Bytes in, by :meth:`feed`; the decoded JSON value out, by :meth:`finish`.

    Both raise ``ValueError`` for bytes that are not one JSON value, as ``json.loads`` does.
    """

    def __init__(self) -> None:
        self._events: Any = ijson.sendable_list()
        # Numbers come as int or Decimal (yajl's own floats cannot hold json's big integers).
        self._coro: Any = ijson.basic_parse_coro(self._events)
        self._builder = _Builder()
        self._quiet_bytes = 0  # fed since the last event: a long token in progress

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        if not data:
            return  # ijson would take it for the end of the input
        try:
            self._coro.send(data)
        except ijson.JSONError as exc:
            raise ValueError(str(exc)) from exc
        if self._events:
            self._builder.take(self._events)
            self._quiet_bytes = 0
        else:
            self._quiet_bytes += len(data)
            if self._quiet_bytes > HOLD_CHARS:
                self._builder.pack_held()

    def feed_text(self, text: str) -> None:
        """A reply already decoded, fed in encoded slices (bench/worker_memory.py measures SSE
        event data parsed this way: no lower than json.loads after httpx-sse, so not used)."""
        for start in range(0, len(text), FEED_BYTES):
            self.feed(text[start : start + FEED_BYTES].encode())

    def finish(self) -> Any:
        """The value, once the input is complete; frees the parser's buffers first."""
        try:
            self._coro.close()
        except ijson.JSONError as exc:
            raise ValueError(str(exc)) from exc
        finally:
            self._coro = None  # yajl's buffers (as long as the longest string) go with it
        self._builder.take(self._events)
        return self._builder.result()


class _Held:
    """A long text block's text, as it came or compressed, and what identifies it."""

    __slots__ = ("ascii", "block", "digest", "head", "length", "packed", "text")

    def __init__(self, block: JsonObject, text: str) -> None:
        self.block = block
        self.text: str | None = text
        self.packed: bytes | None = None
        self.digest: bytes | None = None
        self.length = len(text)
        self.head = text[:_HEAD]
        self.ascii = text.isascii()

    def pack(self) -> None:
        """Compress the text (hashing it on the way) and drop it."""
        if self.text is None:
            return
        packer = zlib.compressobj(1)
        parts = []
        hasher = hashlib.sha256()
        for piece in _encoded([self.text]):
            hasher.update(piece)
            parts.append(packer.compress(piece))
        parts.append(packer.flush())
        self.packed, self.digest, self.text = b"".join(parts), hasher.digest(), None

    def matches(self, pieces: Iterable[str]) -> bool:
        """Whether the text is exactly the concatenation of ``pieces`` (read as they come)."""
        if self.digest is None:
            assert self.text is not None
            whole = hashlib.sha256()
            for part in _encoded([self.text]):
                whole.update(part)
            self.digest = whole.digest()
        hasher, seen = hashlib.sha256(), 0
        for piece in pieces:
            if seen < _HEAD and not _agrees(self.head[seen:], piece):
                return False  # turned down on its first pieces, before any long one is built
            seen += len(piece)
            if seen > self.length:
                return False
            for part in _encoded([piece]):
                hasher.update(part)
        return seen == self.length and hasher.digest() == self.digest

    def restore(self) -> str:
        if self.text is None:
            assert self.packed is not None
            self.text = zlib.decompress(self.packed).decode()
            self.packed = None
        return self.text


class _Builder:
    """``json.loads``'s value from ijson's events, with long text blocks held (see above)."""

    def __init__(self) -> None:
        self._value: Any = None
        self._stack: list[Any] = []
        self._keys: list[str | None] = []
        self._held: list[_Held] = []

    def take(self, events: list[tuple[str, Any]]) -> None:
        stack, keys = self._stack, self._keys
        for event, data in events:
            if event == "map_key":
                keys[-1] = data
                continue
            if event in _ENDS:
                stack.pop()
                keys.pop()
                continue
            if event == "start_map":
                value: Any = {}
            elif event == "start_array":
                value = []
            elif event == "number" and type(data) is Decimal:
                value = float(data)  # what json.loads makes of it
            else:
                value = data
            if not stack:
                self._value = value
            elif keys[-1] is None:
                stack[-1].append(value)
            elif keys[-1] == "text" and event == "string" and len(data) >= HOLD_CHARS:
                held = _Held(stack[-1], data)
                self._held.append(held)
                stack[-1]["text"] = held
            else:
                stack[-1][keys[-1]] = value
            if event in _STARTS:
                stack.append(value)
                keys.append(None)
        del events[:]

    def pack_held(self) -> None:
        for held in self._held:
            held.pack()

    def result(self) -> Any:
        if self._held:
            _settle(self._value, self._held)
            self._held = []
        return self._value


def _settle(value: Any, held: list[_Held]) -> None:
    """Decide each held text: the block dropped, its text shared, or the text put back."""
    waiting = {id(item.block): item for item in held}
    for message in value if isinstance(value, list) else [value]:
        result = message.get("result") if isinstance(message, dict) else None
        if not isinstance(result, dict) or result.get("isError") not in (None, False):
            continue
        content, structured = result.get("content"), result.get("structuredContent")
        if not isinstance(content, list) or not isinstance(structured, dict):
            continue
        dropped = []
        for block in content:
            item = waiting.get(id(block)) if isinstance(block, dict) else None
            if item is None or item.block is not block or block.get("type") != "text":
                continue
            wrapped = structured.get("result") if len(structured) == 1 else None
            if isinstance(wrapped, str) and item.matches([wrapped]):
                block["text"] = wrapped
            elif any(item.matches(pieces) for pieces in _serialisations(structured, item.ascii)):
                dropped.append(block)
            else:
                continue
            del waiting[id(block)]
        if dropped:
            content[:] = [block for block in content if all(block is not d for d in dropped)]
    for item in waiting.values():
        item.block["text"] = item.restore()


def _serialisations(structured: JsonObject, ascii_only: bool) -> Iterator[Iterator[str]]:
    """``structuredContent`` as JSON the ways the SDKs write it, each as the encoder's pieces."""
    for indent, separators in ((2, (",", ": ")), (None, (", ", ": ")), (None, (",", ":"))):
        encoder = json.JSONEncoder(indent=indent, separators=separators, ensure_ascii=ascii_only)
        yield encoder.iterencode(structured)


def _agrees(head: str, piece: str) -> bool:
    """Whether ``piece`` starts as the rest of the held text's head does (as far as both go)."""
    span = min(len(head), len(piece))
    return head[:span] == piece[:span]


def _encoded(texts: Iterable[str]) -> Iterator[bytes]:
    """Each text as UTF-8, in slices of ``_SLICE`` characters (no text encoded whole)."""
    for text in texts:
        for start in range(0, len(text), _SLICE):
            yield text[start : start + _SLICE].encode()
