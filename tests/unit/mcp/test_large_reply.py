"""Large replies parsed as they arrive: the values ``json.loads`` gives, one copy of a result.

The parser is ijson's (yajl2 C); what is doclane's is the building of the value, the text blocks
held aside, and the decision at the end: dropped when they repeat ``structuredContent``, shared
when ``structuredContent`` wraps them, put back otherwise.
"""

from __future__ import annotations

import json
from typing import Any

import pydantic_core
import pytest

from pipeline.mcp._large_reply import FEED_BYTES, HOLD_CHARS, LargeReplyParser

#: Longer than HOLD_CHARS, with what escaping must survive: newlines, quotes, non-ASCII.
MARKDOWN = ('# Title\n\nSome *text* with "quotes", tabs\tand accents: é, ü, 中.\n' * 20_000)[
    : HOLD_CHARS + 12_345
]


def parse(data: bytes, piece: int = FEED_BYTES) -> Any:
    parser = LargeReplyParser()
    for start in range(0, len(data), piece):
        parser.feed(data[start : start + piece])
    return parser.finish()


def reply(result: dict[str, Any], request_id: int = 3) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "result": result}).encode()


def structured_result(text: str, structured: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], "structuredContent": structured, **extra}


@pytest.mark.parametrize("piece", [7, 4096, FEED_BYTES])
def test_values_are_those_json_loads_gives(piece: int) -> None:
    value = {
        "jsonrpc": "2.0",
        "id": "a-1",
        "result": {
            "content": [{"type": "text", "text": MARKDOWN[:5000]}, {"type": "image", "data": "x"}],
            "numbers": [0, -3, 2.5, 1e300, 12345678901234567890],
            "flags": [True, False, None],
            "nested": {"empty": {}, "list": [[], [{}]], "unicode": "\u00e9\ud83d\ude00"},
        },
    }
    data = json.dumps(value).encode()
    assert parse(data, piece) == json.loads(data)
    batch = json.dumps([value, {"jsonrpc": "2.0", "method": "notifications/x"}]).encode()
    assert parse(batch, piece) == json.loads(batch)


@pytest.mark.parametrize(
    "serialise",
    [
        lambda s: json.dumps(s, indent=2),  # the fake server (ensure_ascii)
        lambda s: pydantic_core.to_json(s, indent=2).decode(),  # the SDK's MCPServer
        json.dumps,
        lambda s: json.dumps(s, separators=(",", ":"), ensure_ascii=False),
    ],
    ids=["json-indent", "pydantic-indent", "json-default", "json-compact"],
)
def test_a_text_block_repeating_structured_content_is_not_kept(serialise: Any) -> None:
    structured = {"document_key": "k1", "markdown": MARKDOWN}
    data = reply(structured_result(serialise(structured), structured, isError=False))
    decoded = parse(data, 65536)  # small pieces: the held text is compressed meanwhile
    expected = json.loads(data)
    assert decoded["result"]["structuredContent"] == expected["result"]["structuredContent"]
    assert decoded["result"]["content"] == []
    del expected["result"]["content"], decoded["result"]["content"]
    assert decoded == expected


def test_a_text_block_wrapped_as_the_result_is_one_shared_string() -> None:
    data = reply(structured_result(MARKDOWN, {"result": MARKDOWN}))
    decoded = parse(data, 65536)
    assert decoded == json.loads(data)
    result = decoded["result"]
    assert result["content"][0]["text"] is result["structuredContent"]["result"]


@pytest.mark.parametrize(
    ("text", "structured", "extra"),
    [
        (MARKDOWN, None, {}),  # docling-rs-mcp: the markdown once, as text
        (MARKDOWN + "!", {"markdown": MARKDOWN}, {}),  # another text
        (json.dumps({"markdown": MARKDOWN}, indent=2), {"markdown": MARKDOWN}, {"isError": True}),
        (json.dumps({"markdown": MARKDOWN}, indent=3), {"markdown": MARKDOWN}, {}),  # unknown style
    ],
    ids=["text-only", "different-text", "error-result", "other-serialiser"],
)
def test_any_other_long_text_comes_back_as_it_was_sent(
    text: str, structured: dict[str, Any] | None, extra: dict[str, Any]
) -> None:
    result: dict[str, Any] = {"content": [{"type": "text", "text": text}], **extra}
    if structured is not None:
        result["structuredContent"] = structured
    second = {"type": "text", "text": MARKDOWN.upper()}  # a second long string after it
    result["content"].append(second)
    data = reply(result)
    for piece in (65536, FEED_BYTES):  # compressed while aside, or kept as it came
        assert parse(data, piece) == json.loads(data)


def test_a_long_text_outside_a_result_comes_back_too() -> None:
    data = json.dumps(
        {"jsonrpc": "2.0", "method": "notifications/message", "params": {"text": MARKDOWN}}
    ).encode()
    assert parse(data, 65536) == json.loads(data)


@pytest.mark.parametrize(
    "data",
    [
        b"<html>this is not JSON{",
        b'{"jsonrpc": "2.0", "id": 1, "result": {"text": "' + b"x" * 3_000_000,  # cut short
        b'{"jsonrpc": "2.0"} {"jsonrpc": "2.0"}',  # two values
        b'{"a": "\xff\xfe"}',  # not UTF-8
    ],
    ids=["garbage", "truncated", "two-values", "bad-utf8"],
)
def test_what_json_loads_refuses_is_a_value_error(data: bytes) -> None:
    with pytest.raises(ValueError):
        json.loads(data)
    with pytest.raises(ValueError):
        parse(data, 65536)
