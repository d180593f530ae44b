"""What choosing a server costs a unit of work, by the number of servers (the scale-out figure).

Every conversion is a unit on one origin: the pool reads the origins' circuits, takes an
in-flight lease where the fleet has the fewest, the chosen breaker admits the unit, and the
lease ends with it. This times exactly that path (doclane's ``ServerPool`` with its breakers and
in-flight counts in the machine's Redis, under a scratch namespace removed afterwards; the unit
itself does nothing), for 1, 2, 4 and 8 origins: wall and CPU milliseconds per unit, and the
Redis round trips per unit (commands the pool's client sent; a script is one).

    .venv/bin/python -m bench.investigations.server_choice
        [--origins 1,2,4,8] [--units 3000] [--rounds 3]
        [--compare-with /path/to/other/checkout] [--smoke] [--json]

``--compare-with`` times the other checkout's pool too, in its own process with its code first
on ``PYTHONPATH``, alternating with this one's (A B A B, ``--rounds`` times); each side's figure
is its median over the rounds.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
REDIS_URL = os.environ.get("DOCLANE_REDIS_URL") or "redis://127.0.0.1:6379/0"


def measure(origin_counts: list[int], units: int) -> dict[str, dict[str, float]]:
    """In this process, with whatever ``pipeline`` comes first on the path: the per-unit costs."""
    from pipeline.resilience.in_flight import InFlight
    from pipeline.resilience.pool import ServerPool
    from pipeline.resilience.shared import origin_breaker
    from pipeline.resilience.storage import BreakerRedis
    from pipeline.settings.tree import read_settings

    class CountingRedis(BreakerRedis):
        sent = 0

        def execute_command(self, *args: Any, **options: Any) -> Any:
            self.sent += 1
            return super().execute_command(*args, **options)

    namespace = f"doclane-bench:{uuid.uuid4().hex[:12]}"
    settings = read_settings(resilience=dict(breaker_namespace=namespace)).resilience
    client: Any = CountingRedis.from_url(REDIS_URL, socket_connect_timeout=1.0, socket_timeout=2.0)
    figures: dict[str, dict[str, float]] = {}
    try:
        for count in origin_counts:
            origins = [f"http://docling-{n}.bench:5001" for n in range(count)]
            pool = ServerPool(
                origins,
                lambda endpoint: None,  # type: ignore[arg-type,return-value]  # never called
                lambda origin: origin_breaker(origin, settings, client),
                in_flight=InFlight(client, namespace=namespace, ttl_s=60, retry_s=30),
            )
            for _ in range(min(200, units)):
                one_unit(pool)  # connections made, the in-flight script loaded
            sent = client.sent
            cpu, wall = time.process_time(), time.perf_counter()
            for _ in range(units):
                one_unit(pool)
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
            figures[str(count)] = {
                "wall_ms": round(wall / units * 1000, 4),
                "cpu_ms": round(cpu / units * 1000, 4),
                "round_trips": round((client.sent - sent) / units, 2),
            }
    finally:
        keys = list(client.scan_iter(match=f"{namespace}:*", count=500))
        if keys:
            client.delete(*keys)
        client.close()
    return figures


def one_unit(pool: Any) -> None:
    """Chosen, admitted by its breaker, ended: a conversion's path with nothing converted."""
    with pool.chosen() as choice:
        if isinstance(choice, str):  # a checkout from before the one read of every circuit
            pool.breaker(choice).call(lambda: None)
        else:
            pool.call(choice, lambda: None)


def run_side(checkout: Path, origin_counts: list[int], units: int) -> dict[str, dict[str, float]]:
    """``measure`` in a fresh process with ``checkout``'s code first on the path."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(checkout), str(ROOT)])}
    args = ["--measure", "--origins", ",".join(map(str, origin_counts)), "--units", str(units)]
    done = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), *args],
        cwd=checkout, env=env, capture_output=True, text=True, check=True, timeout=600,
    )  # fmt: skip
    figures: dict[str, dict[str, float]] = json.loads(done.stdout)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--origins", default="1,2,4,8", help="Origin counts, comma-separated.")
    parser.add_argument("--units", type=int, default=3000, help="Units timed per origin count.")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--compare-with", type=Path, help="Another checkout (A B A B).")
    parser.add_argument("--smoke", action="store_true", help="Tiny counts (CI).")
    parser.add_argument("--json", action="store_true", help="Print one JSON object at the end.")
    parser.add_argument("--measure", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    origin_counts = [int(n) for n in args.origins.split(",")]
    if args.smoke:
        origin_counts, args.units, args.rounds = [1, 4], 50, 1
    if args.measure:
        print(json.dumps(measure(origin_counts, args.units)))
        return

    sides = {"this": ROOT}
    if args.compare_with is not None:
        sides = {"before": args.compare_with.resolve(), "this": ROOT}
    runs: dict[str, list[dict[str, dict[str, float]]]] = {side: [] for side in sides}
    for round_no in range(args.rounds):
        for side, checkout in sides.items():
            runs[side].append(run_side(checkout, origin_counts, args.units))
            print(f"round {round_no + 1}, {side}: {runs[side][-1]}", file=sys.stderr)

    medians = {
        side: {
            str(count): {
                key: statistics.median(run[str(count)][key] for run in side_runs)
                for key in ("wall_ms", "cpu_ms", "round_trips")
            }
            for count in origin_counts
        }
        for side, side_runs in runs.items()
    }
    report = {
        "units": args.units,
        "rounds": args.rounds,
        "redis": REDIS_URL.rsplit("@", 1)[-1],
        "sides": {side: str(path) for side, path in sides.items()},
        "medians": medians,
        "runs": runs,
    }
    print(f"per unit, medians of {args.rounds} round(s) of {args.units} units:", file=sys.stderr)
    print(f"{'origins':>7} " + " ".join(f"{side:>26}" for side in sides), file=sys.stderr)
    for count in origin_counts:
        cells = [
            "{wall_ms:6.3f} ms {cpu_ms:6.3f} cpu {round_trips:4.1f} trips".format(
                **medians[s][str(count)]
            )
            for s in sides
        ]
        print(f"{count:>7} " + " ".join(f"{cell:>26}" for cell in cells), file=sys.stderr)
    if args.json:
        print(json.dumps(report))


if __name__ == "__main__":
    main()
