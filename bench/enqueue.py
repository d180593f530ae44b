"""Enqueue: ``doclane submit <folder>`` of 10,000 small files, as a user runs it, timed whole.

The enqueue figure of docs/benchmarks.md (goal: 10,000 files submitted in under 5 s, hashing
included). The files are generated in a scratch folder before the clock starts: unique Markdown
documents of 20 to 50 kB (a realistic small office document's text; every one distinct, so none
is deduplicated), which ``doclane submit`` walks, validates (suffix, content check, UTF-8
decoding), hashes (SHA-256), inserts as jobs and publishes to the broker. The clock runs around
the whole ``doclane submit`` process: interpreter start, imports, walking, hashing, the database
and the broker.

Each repeat gets a freshly migrated scratch database and the bench's Redis database is emptied
(claimed as the test suite claims its brokers: ``bench.harness``), so every
submit creates every job. After each submit the bench checks the guarantees: exactly one job per
file in the database, and no more bells on the broker than jobs (PostgreSQL is the queue; the
broker holds a few bells that wake the workers).

    .venv/bin/python -m bench.enqueue [--smoke] [--files 10000] [--repeats 3] [--json]
        [--profile out.prof]   # also runs one submit under cProfile
        [--phases]             # also runs one submit that times its own steps (no profiler)
        [--compare-with DIR]   # alternate with the doclane of another checkout (A B A B ...)

Figures go to docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psycopg
import redis

from bench.harness import DOCLANE, ROOT, Broker, claim_redis_db, scratch_database
from pipeline.queues import JOB_QUEUES

MIN_BYTES = 20_000
MAX_BYTES = 50_000
GOAL_S = 5.0
_WORDS = (
    "conversion",
    "pipeline",
    "document",
    "table",
    "figure",
    "caption",
    "section",
    "heading",
    "paragraph",
    "result",
    "worker",
    "server",
    "queue",
    "markdown",
    "export",
    "layout",
    "page",
    "footnote",
    "reference",
    "index",
    "summary",
)


def make_files(folder: Path, count: int, seed: int = 15) -> int:
    """``count`` distinct Markdown files of MIN_BYTES..MAX_BYTES; returns their total size."""
    rng = random.Random(seed)
    text = " ".join(rng.choice(_WORDS) for _ in range(MAX_BYTES // 5))
    total = 0
    for n in range(count):
        size = rng.randint(MIN_BYTES, MAX_BYTES)
        start = rng.randint(0, len(text) - size)
        body = f"# Document {n}\n\n{text[start : start + size]}\n".encode()
        sub = folder / f"part-{n // 1000:02d}"
        sub.mkdir(exist_ok=True)
        (sub / f"doc-{n:05d}.md").write_bytes(body)
        total += len(body)
    return total


def messages_waiting(broker: Broker) -> int:
    """Messages in the bench's Redis database, on every priority list of the job queues."""
    client = redis.Redis.from_url(broker.url)
    try:
        total = 0
        for key in client.scan_iter(match="doclane.*"):
            name = key.decode()
            queue = name.split(":")[0].split("\x06")[0]  # kombu's per-priority lists
            if queue in JOB_QUEUES and client.type(key) == b"list":
                total += int(client.llen(key))
        return total
    finally:
        client.close()


def doclane_cli() -> list[str]:
    """``doclane`` as the checkout on ``PYTHONPATH`` has it (its ``pipeline`` and ``workers``):
    ``-P`` leaves the working directory off ``sys.path``, so that checkout comes first."""
    return [sys.executable, "-P", "-c", "from pipeline.cli import main; main()"]


#: ``doclane submit`` as :func:`doclane_cli` runs it, with timers around the three steps of
#: ``pipeline.submission.intake.enqueue`` (the walk's own time without the chunks' COPY and
#: publishing, which happen while it walks); its last line on stderr is the seconds each step
#: took and the seconds of the whole process after the interpreter started (the rest: imports,
#: the Celery app, the database connection, the JSON answer; start_and_exit: the interpreter's
#: start and its exit). A profiler would inflate the steps made of many small calls; these
#: timers cost nothing.
_TIMED_SUBMIT = """
import atexit, json, sys, time
started = time.perf_counter()
try:
    import pipeline.submission.intake as enqueue
except ImportError:  # a checkout from before submission was a package of its own
    import pipeline.jobs.submit as enqueue
# where create_many lives in the checkout on PYTHONPATH (a JobStore's, before the store's split)
try:
    from pipeline.store.submissions import Submissions as creator
except ImportError:
    from pipeline.store import JobStore as creator
steps = {}
def timed(name, step):
    def run(*args, **kwargs):
        began = time.perf_counter()
        try:
            return step(*args, **kwargs)
        finally:
            steps[name] = steps.get(name, 0.0) + time.perf_counter() - began
    return run
# the jobs' insert: admit() (a tenant's quota, then create_many's COPY) where it exists
making = "admit" if hasattr(creator, "admit") else "create_many"
setattr(creator, making, timed("copy", getattr(creator, making)))
enqueue.ring = timed("publish", enqueue.ring)
expand = enqueue.expand
def expand_alone(*args, **kwargs):
    # the jobs are made and published in chunks while expand() walks: their time is theirs
    began, inner = time.perf_counter(), steps.get("copy", 0.0) + steps.get("publish", 0.0)
    try:
        return expand(*args, **kwargs)
    finally:
        inner = steps.get("copy", 0.0) + steps.get("publish", 0.0) - inner
        spent = time.perf_counter() - began - inner
        steps["walk_validate_hash"] = steps.get("walk_validate_hash", 0.0) + spent
enqueue.expand = expand_alone
def report():
    steps["process"] = time.perf_counter() - started
    print(json.dumps(steps), file=sys.stderr)
atexit.register(report)
from pipeline.cli import main
main()
"""


def submit_once(
    folder: Path,
    count: int,
    broker: Broker,
    repeat: int,
    *,
    profile: Path | None = None,
    phases: bool = False,
    root: Path = ROOT,
) -> dict[str, Any]:
    broker.flush()
    with scratch_database(f"doclane_bench_enqueue_{os.getpid()}_{repeat}") as db_url:
        env = {
            **os.environ,
            "DOCLANE_DATABASE_URL": db_url,
            "DOCLANE_BROKER_URL": broker.url,
            "DOCLANE_REDIS_URL": broker.url,
            "DOCLANE_LOG_LEVEL": "WARNING",
        }
        subprocess.run([DOCLANE, "db", "migrate"], env=env, check=True, capture_output=True)
        command = [*doclane_cli(), "submit", str(folder), "--json"]
        if profile is not None:
            command = [sys.executable, "-m", "cProfile", "-o", str(profile), DOCLANE]
            command += ["submit", str(folder), "--json"]
        if phases:
            command = [sys.executable, "-P", "-c", _TIMED_SUBMIT, "submit", str(folder), "--json"]
        if profile is None or phases:  # whose doclane submit runs (doclane_cli, _TIMED_SUBMIT)
            env["PYTHONPATH"] = str(root)
        load_before = Path("/proc/loadavg").read_text().split()[0]
        started = time.perf_counter()
        done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
        seconds = time.perf_counter() - started
        if done.returncode != 0 or not done.stdout.strip():
            raise SystemExit(f"doclane submit failed ({done.returncode}): {done.stderr[-3000:]}")
        out = json.loads(done.stdout)
        with psycopg.connect(db_url) as conn:
            row = conn.execute(
                "SELECT count(*), count(DISTINCT source_uri), count(*) FILTER"
                " (WHERE state = 'queued') FROM jobs"
            ).fetchone()
        assert row is not None
        jobs, distinct, queued = (int(v) for v in row)
    published = sum(1 for item in out["accepted"] if item["published"])
    waiting = messages_waiting(broker)
    problems = []
    if jobs != count or distinct != count or queued != count:
        problems.append(f"{jobs} jobs ({distinct} distinct files, {queued} queued) for {count}")
    # the jobs wait in PostgreSQL; the broker holds a few bells (code before them: a message a
    # job), never more messages than jobs
    if published != count or not 0 < waiting <= count:
        problems.append(f"{published} reported published, {waiting} messages waiting")
    if out["rejected"]:
        problems.append(f"{len(out['rejected'])} refused")
    run: dict[str, Any] = {
        "seconds": seconds,
        "jobs": jobs,
        "messages": waiting,
        "problems": problems,
        "load_before": load_before,
        "load_after": Path("/proc/loadavg").read_text().split()[0],
    }
    if phases:
        steps = json.loads(done.stderr.strip().splitlines()[-1])
        process = steps.pop("process")
        run["phases"] = {
            **steps,
            "rest": process - sum(steps.values()),
            "start_and_exit": seconds - process,
        }
    return run


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--smoke", action="store_true", help="50 files, 1 repeat (CI)")
    parser.add_argument("--profile", type=Path, help="cProfile one extra submit into this file")
    parser.add_argument(
        "--phases", action="store_true", help="one extra submit that times its own steps"
    )
    parser.add_argument(
        "--compare-with", type=Path, help="another checkout whose doclane submit alternates"
    )
    parser.add_argument("--json", action="store_true")
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    if args.smoke:
        args.files, args.repeats = 50, 1
    scratch = Path(tempfile.mkdtemp(prefix="doclane-bench-enqueue-"))
    broker = claim_redis_db()
    try:
        folder = scratch / "inbox"
        folder.mkdir()
        total = make_files(folder, args.files)
        runs, other = [], []
        for n in range(args.repeats):
            if args.compare_with is not None:
                other.append(submit_once(folder, args.files, broker, n, root=args.compare_with))
            runs.append(submit_once(folder, args.files, broker, n))
        if args.profile is not None:
            submit_once(folder, args.files, broker, args.repeats, profile=args.profile)
        phases = []
        if args.phases:
            if args.compare_with is not None:
                phases.append(
                    submit_once(folder, args.files, broker, 0, phases=True, root=args.compare_with)
                )
            phases.append(submit_once(folder, args.files, broker, 0, phases=True))
    finally:
        broker.release()
        shutil.rmtree(scratch, ignore_errors=True)
    report = summarize(args, total, runs, other)
    if phases:
        report["ok"] = report["ok"] and all(not run["problems"] for run in phases)
        report["phases"] = phases[-1]["phases"]
        if args.compare_with is not None:
            report["compared_with"]["phases"] = phases[0]["phases"]
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        show(report)


def summarize(
    args: argparse.Namespace, total: int, runs: list[dict[str, Any]], other: list[dict[str, Any]]
) -> dict[str, Any]:
    median = statistics.median(run["seconds"] for run in runs)
    report: dict[str, Any] = {
        "files": args.files,
        "bytes_total": total,
        "bytes_per_file": [MIN_BYTES, MAX_BYTES],
        "runs": runs,
        "median_s": median,
        "files_per_s": args.files / median,
        "goal_s": GOAL_S,
        "ok": all(not run["problems"] for run in runs),
    }
    if other:
        other_median = statistics.median(run["seconds"] for run in other)
        report["compared_with"] = {
            "checkout": str(args.compare_with),
            "runs": other,
            "median_s": other_median,
            "ratio": median / other_median,
        }
    return report


def show(report: dict[str, Any]) -> None:
    files, total = report["files"], report["bytes_total"]
    print(
        f"{files} Markdown files of {MIN_BYTES // 1000}-{MAX_BYTES // 1000} kB "
        f"({total / 1e6:.0f} MB): doclane submit <folder>"
    )
    sides = [("this checkout", report)]
    if "compared_with" in report:
        sides.append((report["compared_with"]["checkout"], report["compared_with"]))
    for name, side in sides:
        print(f"{name}:")
        for run in side["runs"]:
            print(
                f"  {run['seconds']:.2f} s  jobs {run['jobs']}  messages {run['messages']}  "
                f"load {run['load_before']} -> {run['load_after']}  {'; '.join(run['problems'])}"
            )
        print(f"  median {side['median_s']:.2f} s ({files / side['median_s']:.0f} files/s)")
        if "phases" in side:
            steps = ", ".join(f"{name} {s:.2f} s" for name, s in side["phases"].items())
            print(f"  one timed submit: {steps}")
    if "compared_with" in report:
        print(f"ratio {report['compared_with']['ratio']:.2f} (this / the other)")
    print(f"goal < {GOAL_S} s")


if __name__ == "__main__":
    main()
