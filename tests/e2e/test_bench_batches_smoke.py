"""The batch benches still work: each runs at its smoke size against the real docling-mcp.

Their figures mean nothing here (docs/benchmarks.md holds the measured ones); what is checked
is that every mode ran, every markdown of the pipeline matched the direct call's, and the proof
cost bench matched every key to its file. The documents are the six samples of examples/ (no
network).
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.fixtures.benches import run_bench as run_fixture_bench
from tests.fixtures.docling_server import docling_binary
from tests.fixtures.examples import EXAMPLES_DIR

pytestmark = pytest.mark.docling


def run_bench(name: str, *args: str) -> dict[str, Any]:
    docling_binary()  # fails loudly when the server is not installed
    return run_fixture_bench(name, *args)


def test_proof_cost_smoke() -> None:
    report = run_bench("investigations.proof_cost", "--corpus", str(EXAMPLES_DIR), "--smoke")
    summary = report["summary"]
    assert isinstance(summary, dict) and summary["documents"] == 6
    assert sorted(summary["per_format"]) == ["csv", "docx", "html", "md", "pptx", "xlsx"]


def test_batch_throughput_smoke() -> None:
    report = run_bench(
        "batch_throughput", "--corpus", str(EXAMPLES_DIR), "--smoke", "--batch-docs", "6"
    )
    rows = report["pipeline"]
    assert isinstance(rows, list) and [row["mode"] for row in rows] == ["off-c1", "on6-c1"]
    for row in rows:
        assert row["markdown_identical"] == row["succeeded"] == 6, row
        assert row["failure_codes_differ"] == {} and row["not_finished"] == {}, row
    assert rows[1]["batch_calls"] == 1
    # Where the worker's time went, from the trail: every call of the off mode, and the one
    # directory call of the batch counted once, not once per member.
    off, on = rows[0]["tool_seconds"], rows[1]["tool_seconds"]
    assert set(off) == {
        "convert_document_into_docling_document",
        "export_docling_document_to_markdown",
    }, off
    assert "convert_directory_files_into_docling_document" in on, on
