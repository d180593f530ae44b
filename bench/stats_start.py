"""What ``doclane stats`` costs beyond the CLI's own start, with a worker alive.

The goal: under 300 ms beyond ``doclane version`` (the CLI's start: the interpreter, typer, the
root command). ``stats`` asks PostgreSQL, the broker (queue depths) and Redis (the breakers, and
the live workers from their heartbeats), so it runs here against all of them: a scratch
database, a claimed Redis database as broker and breaker store, the fake MCP server as the
configured origin, and one ``doclane worker -c 1`` alive (its heartbeat is what ``stats``
reads). Each command is a fresh process, timed from outside: wall seconds, and the CPU seconds
the kernel charged it (``os.wait4``). The commands alternate, stats then version, checkout
after checkout, round after round, so a drift in the machine's speed lands on all alike; a
warm-up round is not counted.

``--checkout PATH`` (repeatable) compares checkouts side by side in one run: each command runs
with ``PYTHONPATH=PATH``, so the same installed environment runs that checkout's code (default:
this one). The worker runs this checkout's code. Every process keeps its compiled bytecode in
a scratch folder (``PYTHONPYCACHEPREFIX``; ``PYTHONDONTWRITEBYTECODE`` dropped), written by the
warm-up round: an installed doclane runs from bytecode, while a checkout run without it
compiles each of its own modules again on every start (most of stats's), and nothing is
written into the checkouts.

    .venv/bin/python -m bench.stats_start [--runs 15] [--checkout /path/to/other] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.harness import (
    DOCLANE,
    ROOT,
    FakeServer,
    claim_redis_db,
    commit_of,
    print_json,
    scratch_database,
    start_worker,
    stop_worker,
    worker_env,
)

GOAL_S = 0.300
COMMANDS = {"stats": ["stats", "--json"], "version": ["version"]}


def run_once(argv: list[str], env: dict[str, str], cwd: Path, out: Path) -> tuple[float, float]:
    """Wall and CPU seconds (user + system, the process's own) of one run; it must exit 0."""
    with open(out, "wb") as sink:
        started = time.perf_counter()
        proc = subprocess.Popen(argv, env=env, cwd=cwd, stdout=sink, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - started
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} exited {proc.returncode}: {out.read_text()[-2000:]}")
    return wall, usage.ru_utime + usage.ru_stime


def label_of(checkout: Path) -> str:
    return f"{checkout} ({commit_of(checkout) or '?'})"


def wait_for_heartbeat(env: dict[str, str], cwd: Path) -> list[str]:
    """Until ``stats`` lists the worker (its first heartbeat follows its start)."""
    deadline = time.monotonic() + 60
    while True:
        done = subprocess.run(
            [DOCLANE, *COMMANDS["stats"]],
            env=env,
            cwd=cwd,
            capture_output=True,
            text=True,
            check=False,
        )
        workers = (json.loads(done.stdout).get("workers") or []) if done.stdout else []
        if workers:
            return [w["name"] for w in workers]
        if time.monotonic() > deadline:
            raise SystemExit(f"no worker heartbeat within 60 s: {done.stdout[-500:]}")
        time.sleep(0.5)  # polling the worker's first beat, not a synchronisation


def figures(samples: list[tuple[float, float]]) -> dict[str, float]:
    walls, cpus = [s[0] for s in samples], [s[1] for s in samples]
    return {
        "wall_s": statistics.median(walls),
        "wall_min_s": min(walls),
        "wall_max_s": max(walls),
        "cpu_s": statistics.median(cpus),
        "cpu_min_s": min(cpus),
        "cpu_max_s": max(cpus),
    }


def measure(args: argparse.Namespace, scratch: Path) -> dict[str, Any]:
    checkouts = [Path(p).resolve() for p in (args.checkout or [str(ROOT)])]
    broker = claim_redis_db()
    try:
        with (
            scratch_database(f"doclane_bench_stats_{os.getpid()}") as db_url,
            FakeServer(scratch) as server,
        ):
            env = worker_env(db_url, broker, server.origin)
            env.pop("PYTHONDONTWRITEBYTECODE", None)
            env["PYTHONPYCACHEPREFIX"] = str(scratch / "bytecode")
            worker = start_worker(env, scratch / "worker.log", "-c", "1")
            try:
                seen = wait_for_heartbeat(env, scratch)
                envs = {path: {**env, "PYTHONPATH": str(path)} for path in checkouts}
                samples: dict[Path, dict[str, list[tuple[float, float]]]] = {
                    path: {name: [] for name in COMMANDS} for path in checkouts
                }
                load_before = os.getloadavg()
                for round_ in range(args.runs + 1):  # round 0 warms the caches up
                    for path in checkouts:
                        for name, command in COMMANDS.items():
                            out = scratch / f"{name}.out"
                            taken = run_once([DOCLANE, *command], envs[path], scratch, out)
                            if round_:
                                samples[path][name].append(taken)
                    print(f"round {round_}/{args.runs}", file=sys.stderr)
                load_after = os.getloadavg()
            finally:
                stop_worker(worker)
    finally:
        broker.release()
    report: dict[str, Any] = {
        "runs": args.runs,
        "cpus": os.cpu_count(),
        "workers_alive": seen,
        "load_before": [round(x, 2) for x in load_before],
        "load_after": [round(x, 2) for x in load_after],
        "goal_beyond_version_s": GOAL_S,
        "checkouts": {},
    }
    for path in checkouts:
        stats, version = samples[path]["stats"], samples[path]["version"]
        beyond = [(s[0] - v[0], s[1] - v[1]) for s, v in zip(stats, version, strict=True)]
        report["checkouts"][label_of(path)] = {
            "stats": figures(stats),
            "version": figures(version),
            # stats minus the version run beside it, round by round: the median of those
            "beyond_version": figures(beyond),
        }
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15, help="counted rounds (after a warm-up)")
    parser.add_argument(
        "--checkout",
        action="append",
        help="a checkout to run the commands from (PYTHONPATH); repeat to compare",
    )
    parser.add_argument("--json", action="store_true", help="the report as JSON on stdout")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="doclane-bench-stats-") as scratch:
        report = measure(args, Path(scratch))
    if args.json:
        print_json(report)
        return
    print(
        f"{report['runs']} rounds, {report['cpus']} CPUs, workers alive: "
        f"{report['workers_alive']}, load {report['load_before']} -> {report['load_after']}"
    )
    print(f"{'checkout':<44} {'command':<16} {'cpu s':>7} {'wall s':>7}  (median; min-max)")
    for label, parts in report["checkouts"].items():
        for name, f in parts.items():
            print(
                f"{label:<44} {name:<16} {f['cpu_s']:7.3f} {f['wall_s']:7.3f}  "
                f"(cpu {f['cpu_min_s']:.3f}-{f['cpu_max_s']:.3f}, "
                f"wall {f['wall_min_s']:.3f}-{f['wall_max_s']:.3f})"
            )
    print(f"goal: stats under {GOAL_S:.3f} s beyond version (wall, workers alive)")


if __name__ == "__main__":
    main()
