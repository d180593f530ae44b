"""The catalog and the classifier: the one answer to "what is this failure?"."""

from __future__ import annotations

import pickle

import pytest

import errors
from errors import CATALOG, ERROR_CLASSES, JSONRPC_CODES, PipelineError, classify

#: E314 (OAuth): the authorization server failed for now; not the MCP server's breaker.
#: E402: the object store of results failed for now (the attempt is retried, nothing committed).
#: E115: a tenant's queue was full; the same document may be submitted again once it drains.
DESIGN_RETRYABLE = {
    *("E107", "E115", "E122", "E204", "E302", "E303", "E308", "E309", "E314", "E401", "E402"),
}
DESIGN_TRIPS_BREAKER = {"E204", "E302", "E303", "E308"}


def test_every_catalog_code_has_exactly_one_class() -> None:
    assert set(CATALOG) == set(ERROR_CLASSES)
    for code, cls in ERROR_CLASSES.items():
        assert cls.code == code
        assert cls(None).entry is CATALOG[code]


def test_retryable_and_breaker_flags_match_the_design() -> None:
    assert {c for c, e in CATALOG.items() if e.retryable} == DESIGN_RETRYABLE
    assert {c for c, e in CATALOG.items() if e.trips_breaker} == DESIGN_TRIPS_BREAKER


def test_families_follow_the_code_ranges() -> None:
    family = {
        "1": errors.InputError,
        "2": errors.ProtocolError,
        "3": errors.McpRuntimeError,
        "4": errors.StoreError,
    }
    for code, cls in ERROR_CLASSES.items():
        assert issubclass(cls, family[code[1]]), code


def test_jsonrpc_codes_never_overlap_and_map_into_the_catalog() -> None:
    assert len(set(JSONRPC_CODES.values())) == len(JSONRPC_CODES)
    assert set(JSONRPC_CODES.values()) <= set(CATALOG)


@pytest.mark.parametrize(
    ("wire", "code"),
    [
        (-32700, "E200"),
        (-32600, "E201"),
        (-32601, "E202"),
        (-32602, "E203"),
        (-32603, "E204"),
        (-32000, "E302"),
        (-32001, "E303"),
        (-32002, "E306"),
        (-32003, "E307"),
        (-32099, "E299"),
        (12345, "E299"),
    ],
)
def test_jsonrpc_error_objects(wire: int, code: str) -> None:
    err = classify({"code": wire, "message": "boom", "data": {"x": 1}})
    assert err.code == code
    assert err.jsonrpc_code == wire
    assert err.message == "boom"
    # a whole response carrying the error is understood too
    assert (
        classify({"jsonrpc": "2.0", "id": 3, "error": {"code": wire, "message": "m"}}).code == code
    )


@pytest.mark.parametrize(
    ("status", "code"),
    [
        (401, "E310"),
        (403, "E310"),
        (404, "E308"),
        (408, "E303"),
        (429, "E302"),
        (500, "E302"),
        (503, "E302"),
        (400, "E201"),
        (406, "E201"),
    ],
)
def test_http_statuses(status: int, code: str) -> None:
    err = classify(status)
    assert err.code == code
    assert err.http_status == status


def test_is_error_results_by_stage() -> None:
    result = {"content": [{"type": "text", "text": "Error executing tool x"}], "isError": True}
    convert = classify(result)
    export = classify(result, stage="export")
    assert (convert.code, export.code) == ("E306", "E307")
    assert convert.message == "Error executing tool x"


def test_foreign_exceptions() -> None:
    assert classify(TimeoutError("slow")).code == "E303"
    assert classify(ConnectionRefusedError("nope")).code == "E302"
    unknown = classify(ValueError("what"))
    assert unknown.code == "E399"
    assert "ValueError" in unknown.message


def test_pipeline_errors_pass_through_unchanged() -> None:
    err = errors.CircuitOpen("open", retry_after=2.5)
    assert classify(err) is err


def test_never_raises_on_odd_input() -> None:
    for odd in (None, True, "text", 3.5, 42, {"nothing": 1}, object()):
        assert isinstance(classify(odd), PipelineError)


def test_to_dict_and_pickling_keep_everything() -> None:
    err = errors.InvalidParams("source: field required", jsonrpc_code=-32602, detail={"f": 1})
    data = err.to_dict()
    assert data["code"] == "E203"
    assert data["retryable"] is False
    assert data["jsonrpc_code"] == -32602
    assert data["user_message"] and data["action"]
    clone = pickle.loads(pickle.dumps(err))
    assert type(clone) is errors.InvalidParams
    assert clone.to_dict() == data


def test_a_reworded_error_says_the_new_message_everywhere() -> None:
    err = errors.DatabaseUnavailable("storing results: PoolTimeout", detail={"f": 1})
    err.reword(f"{err.message} (3 job(s) were made before it)")
    assert err.message == "storing results: PoolTimeout (3 job(s) were made before it)"
    assert str(err) == "E401: storing results: PoolTimeout (3 job(s) were made before it)"
    assert err.to_dict()["message"] == err.message and err.detail == {"f": 1}
    assert str(pickle.loads(pickle.dumps(err))) == str(err)


def test_long_wire_text_is_bounded() -> None:
    err = classify({"code": -32603, "message": "x" * 100_000, "data": "y" * 100_000})
    assert len(err.message) <= 2000
    assert len(repr(err.detail)) <= 2100
