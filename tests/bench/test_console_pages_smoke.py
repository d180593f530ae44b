"""``python -m bench.console_pages`` at a tiny size: it must keep working; its figures mean
nothing."""

from __future__ import annotations

from tests.fixtures.benches import run_bench


def test_console_pages_smoke() -> None:
    out = run_bench("console_pages", "--jobs", "400", "--requests", "2")
    assert out["jobs"] == 400
    assert set(out["pages_ms"]) == {
        "list: newest", "list: page 200", "list: failed", "list: failed E303",
        "list: error code E303", "list: queue doclane.large",
        "list: a submission", "list: a submission, page 20",
        "job: failed, its history", "job: succeeded, its markdown",
    }  # fmt: skip
    assert all(0 < t["median"] <= t["worst"] for t in out["pages_ms"].values())
