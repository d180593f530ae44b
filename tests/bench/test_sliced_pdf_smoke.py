"""bench/sliced_pdf.py still works: a small PDF, sliced by the fleet, equals one direct call.

Not a measurement (40 pages, slices of 8): the bench runs end to end, the document is split
into its five slices and assembled, and its Markdown equals the direct call's.
"""

from __future__ import annotations

import pytest

from tests.fixtures.benches import run_bench

pytestmark = pytest.mark.docling


@pytest.mark.timeout(600)
def test_sliced_pdf_smoke() -> None:
    report = run_bench("sliced_pdf", "--smoke", timeout=580)
    assert (report["state"], report["slices"]) == ("succeeded", 5), report
    assert report["md_equal"], report
    assert report["direct_s"] > 0 and report["sliced_s"] > 0
