"""Draw docs/benchmarks.png: each ratio of docs/benchmarks.md's table against its goal.

    .venv/bin/python scripts/benchmarks_plot.py

The values are the table's, copied by hand: when a row of the table changes, change its line
here and run the script again. Only the rows that are a ratio to something are drawn (a time
or a count has no common axis with them); the axis is logarithmic, so that 0.24 and 6.0 both
read. A dot is one recorded value (a round, a revision or a mode), the bar the goal: a
filled dot met it, a hollow one did not.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

OUT = Path(__file__).resolve().parents[1] / "docs" / "benchmarks.png"

#: (label, recorded values, goal, whether higher is better)
ROWS: list[tuple[str, list[float], float, bool]] = [
    ("MCP client / the SDK (25 Nov)", [0.54, 0.73], 0.8, False),
    ("MCP client / bare httpx (25 Nov)", [1.13, 1.13], 1.15, False),
    ("pipeline / sequential client pairs (29 Nov)", [0.79, 0.84], 1.0, True),
    ("over docling-rs-mcp / two direct clients (29 Nov)", [0.39, 0.29, 0.24], 0.95, True),
    ("over docling-rs-mcp / docling-serve's API (26 Nov)", [6.0, 3.7], 3.0, True),
    ("docling-mcp, batches / docling-serve's API (23 Nov)", [0.70, 0.57, 1.04, 0.59], 1.0, True),
    ("docling-mcp, batches off / direct, the 103 (29 Nov)", [0.99], 0.97, True),
    ("docling-mcp, batches off / direct, the 286 (25 Nov, 6 Dec)", [0.97, 0.90], 0.95, True),
    ("docling-mcp, batches of 64 / direct, the 286 (25 Nov, 6 Dec)", [5.35, 5.01], 5.0, True),
    ("scale-out / linear, 2x4 4x4 4x8 (25 Nov)", [0.92, 0.92, 0.90], 0.9, True),
]


def main() -> None:
    fig, ax = plt.subplots(figsize=(9, 0.45 * len(ROWS) + 1.2))
    for y, (_label, values, goal, higher) in enumerate(reversed(ROWS)):
        ax.plot([goal, goal], [y - 0.3, y + 0.3], color="black", linewidth=2)
        for value in values:
            met = value >= goal if higher else value <= goal
            ax.plot(
                value, y, "o", markersize=7, color="tab:green" if met else "tab:red",
                fillstyle="full" if met else "none", markeredgewidth=1.5,
            )  # fmt: skip
    ax.set_xscale("log")
    ax.minorticks_off()
    ax.set_xticks([0.2, 0.5, 1, 2, 5])
    ax.set_xticklabels(["0.2", "0.5", "1", "2", "5"])
    ax.set_yticks(range(len(ROWS)))
    ax.set_yticklabels([label for label, *_ in reversed(ROWS)], fontsize=8)
    ax.set_xlabel("ratio (the bar: its goal; filled: met, hollow: missed)")
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    fig.savefig(OUT, dpi=110)
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
