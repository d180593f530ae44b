"""Turning timings into a bench's figures, and its report into its output."""

from __future__ import annotations

import json
from typing import Any


def percentile(values: list[float], q: float) -> float:
    """The ``q`` quantile (0..1) by linear interpolation; 0.0 for no values."""
    if not values:
        return 0.0
    ordered = sorted(values)
    pos = q * (len(ordered) - 1)
    low = int(pos)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


def print_json(report: dict[str, Any]) -> None:
    """A bench's ``--json`` report: one JSON object on stdout, the whole of stdout (progress
    goes to stderr), which is what tests/fixtures/benches.py reads."""
    print(json.dumps(report), flush=True)
