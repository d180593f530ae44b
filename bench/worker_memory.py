"""Worker and API memory: RSS growth over 1,000 jobs, and peaks around one 50 MB result.

The memory figure of docs/benchmarks.md, against the fake docling server
(``tests.fakes.server``, instant tools), a scratch database and a claimed Redis database
(bench.harness):

1. ``doclane worker --concurrency 1``: RSS (``VmRSS`` in ``/proc``) of its pool process and its
   main process after 10 jobs, and again after 1,000 (goal: growth under 50 MB). The jobs are
   small unique Markdown files, converted and exported to markdown as any job is.
2. Storing: one Markdown source of ``--result-mb`` MB (default 50) whose exported markdown is as
   large. The pool process's peak (``VmHWM``, reset through ``/proc/<pid>/clear_refs`` just
   before) while it calls the tools, receives the reply (the markdown twice, as the SDK sends a
   structured result: text and ``structuredContent``) and stores the result. That worker speaks
   SSE (2025-11-25); ``storing_wires`` is the same job in a fresh worker warmed by one small
   job, with the fake answering JSON bodies (2026-07-28) and as each pool process's stdio child.
3. Serving: ``doclane api``, then ``GET /v1/jobs/{id}/result/md`` of that result, read and
   counted by the bench; the API process's peak (``VmHWM``, reset the same way) meanwhile.
4. Where the storing peak is: the same convert and export of the same source by ``McpClient``
   alone, in a fresh process, its peak counted the same way (``reply_alone``). What the worker
   adds to this is the job's own work (the store's COPY, the job's rows). Measured on each
   wire: ``sse`` (2025-11-25, the worker's), ``json`` (2026-07-28, where the fake answers
   ``application/json``) and ``stdio`` (the fake as the client's child process).

5. ``--sse-alone``: only ``httpx-sse`` reading that reply (one SSE event, the markdown twice,
   fed in ``--sse-chunk-kb`` chunks, 64 by default) in a fresh process, alone, then with
   ``json.loads`` of the event's data, then with the event's data parsed as it is fed by
   ``pipeline.mcp._large_reply`` (one copy of the markdown kept): how much of the peak is the
   SSE parser's before any JSON parser sees a byte.
6. ``--docling-rs``: the same storing (a warmed worker, one job of the large source) and lone
   client through docling-rs-mcp, over stdio (a child per worker process) and over HTTP
   (``--http``). Its reply carries the markdown once, as one text block; its markdown of a
   markdown source is not byte for byte the source, so its factor counts the markdown it sent.

Goal for 2 and 3: the peak under 4x the result, counted from the process's RSS just before.

    .venv/bin/python -m bench.worker_memory [--smoke] [--jobs 1000] [--result-mb 50] [--json]
        [--rounds N] [--compare-with DIR]   # alternate with another checkout's code (A B A B)
        [--docling-rs | --only-docling-rs]
    .venv/bin/python -m bench.worker_memory --sse-alone [--result-mb 50] [--sse-chunk-kb 64]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

from bench.harness import (
    DOCLANE,
    ROOT,
    FakeServer,
    claim_redis_db,
    free_port,
    scratch_database,
    start_worker,
    stop_worker,
    wait_succeeded,
    worker_env,
)
from bench.harness.docling_rs import RsServer
from bench.harness.processes import children_of, rss_mb, status_kb

MB = 1024 * 1024
GROWTH_GOAL_MB = 50
PEAK_FACTOR_GOAL = 4
TOKEN = "bench-memory-token"
_WORDS = (
    "result",
    "markdown",
    "worker",
    "memory",
    "table",
    "figure",
    "page",
    "text",
    "section",
    "store",
)


# ---- /proc ------------------------------------------------------------------------------------
def peak_mb(pid: int) -> float:
    return status_kb(pid, "VmHWM") / 1024


def reset_peak(pid: int) -> None:
    """Make ``VmHWM`` start again from the current RSS (Linux: ``5`` to ``clear_refs``)."""
    Path(f"/proc/{pid}/clear_refs").write_text("5")


def pool_process(worker_pid: int) -> int:
    """The one prefork pool process of ``doclane worker --concurrency 1``."""
    deadline = time.monotonic() + 60
    while True:
        kids = children_of(worker_pid)
        if len(kids) == 1:
            return kids[0]
        if time.monotonic() > deadline:
            raise SystemExit(f"expected one pool process under {worker_pid}, found {kids}")
        time.sleep(0.2)


# ---- the pieces ---------------------------------------------------------------------------------
def write_small_files(folder: Path, first: int, count: int) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    rng = random.Random(first)
    for n in range(first, first + count):
        words = " ".join(rng.choice(_WORDS) for _ in range(400))
        (folder / f"doc-{n:05d}.md").write_text(f"# Document {n}\n\n{words}\n")


def write_large_file(path: Path, size: int) -> None:
    """Markdown of exactly ``size`` bytes, in lines of ordinary words."""
    rng = random.Random(7)
    line = " ".join(rng.choice(_WORDS) for _ in range(12)) + "\n"
    body = ("# A large result\n\n" + line * (size // len(line) + 1)).encode()[:size]
    path.write_bytes(body)


def submit(env: dict[str, str], folder: Path, *options: str) -> list[str]:
    done = subprocess.run(
        [DOCLANE, "submit", str(folder), "--json", *options],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if not done.stdout.strip():
        raise SystemExit(f"doclane submit failed: {done.stderr[-2000:]}")
    out = json.loads(done.stdout)
    if out["rejected"]:
        raise SystemExit(f"refused: {out['rejected'][:3]}")
    return [item["job_id"] for item in out["accepted"]]


@contextmanager
def api_server(env: dict[str, str], log: Path) -> Iterator[tuple[int, str]]:
    port = free_port()
    api_env = {**env, "DOCLANE_API_TOKEN": TOKEN, "DOCLANE_API_PORT": str(port)}
    with open(log, "wb") as out:
        proc = subprocess.Popen([DOCLANE, "api"], env=api_env, stdout=out, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"{base}/healthz", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"doclane api did not start (log: {log})")
            time.sleep(0.2)
        yield proc.pid, base
    finally:
        proc.terminate()
        proc.wait(timeout=30)


# ---- the measurement ---------------------------------------------------------------------------
def measure(
    jobs: int,
    result_mb: int,
    scratch: Path,
    code: Path,
    *,
    docling_rs: bool = False,
    fake: bool = True,
) -> dict[str, Any]:
    """One run of every figure, with the doclane of checkout ``code`` (``PYTHONPATH``); without
    ``fake``, only the docling-rs rows."""
    report: dict[str, Any] = {"jobs": jobs, "result_mb": result_mb, "checkout": str(code)}
    broker = claim_redis_db()
    try:
        with (
            FakeServer(scratch) as server,
            scratch_database(f"doclane_bench_memory_{os.getpid()}") as db_url,
        ):
            env = {**worker_env(db_url, broker, server.url), "PYTHONPATH": str(code)}
            if fake:
                done = through_the_fake(report, env, db_url, scratch, code=code, server=server)
            else:  # the docling-rs rows alone: their large source, and no job before them
                large = scratch / "large" / "large.md"
                large.parent.mkdir()
                write_large_file(large, result_mb * MB)
                done = 0
            if docling_rs:
                report["docling_rs"] = {}
                for n, wire in enumerate(("stdio", "http")):
                    try:  # a failure here leaves the figures above standing
                        figures = through_docling_rs(
                            env, db_url, scratch, code, wire, done=done + 2 * n
                        )
                    except (SystemExit, Exception) as exc:
                        figures = {"error": f"{type(exc).__name__}: {exc}"}
                    report["docling_rs"][wire] = figures
    finally:
        broker.release()
    return report


def through_the_fake(
    report: dict[str, Any],
    env: dict[str, str],
    db_url: str,
    scratch: Path,
    *,
    code: Path,
    server: FakeServer,
) -> int:
    """Figures 1-4 against the fake server, into ``report``; the jobs that succeeded."""
    jobs, result_mb = int(report["jobs"]), int(report["result_mb"])
    worker = start_worker(env, scratch / "worker.log", "--concurrency", "1", "--no-beat")
    try:
        pool = pool_process(worker.pid)
        report.update(growth(env, db_url, scratch, jobs, (worker.pid, pool)))
        job_id, report["storing"] = storing(
            env, db_url, scratch, jobs=jobs, pool=pool, result_mb=result_mb
        )
    finally:
        stop_worker(worker)
    report["serving"] = serving(env, scratch, job_id, result_mb)
    large = scratch / "large" / "large.md"
    report["reply_alone"] = {
        wire: reply_alone(wire_env(env, wire, server), code, large, result_mb) for wire in WIRES
    }
    done = jobs + 1
    report["storing_wires"] = {}
    for wire in ("json", "stdio"):
        peaks = warm_storing(wire_env(env, wire, server), db_url, scratch / wire, done=done)
        report["storing_wires"][wire] = peak_figures(*peaks, result_mb)
        done += 2
    server.configure(stateless=False)
    return done


def growth(
    env: dict[str, str], db_url: str, scratch: Path, jobs: int, pids: tuple[int, int]
) -> dict[str, Any]:
    """RSS after the first 10 jobs and after all of them."""
    main_pid, pool = pids
    first = min(10, jobs)
    write_small_files(scratch / "first", 0, first)
    submit(env, scratch / "first")
    wait_succeeded(db_url, first, timeout=300)
    after_first = {"pool": rss_mb(pool), "main": rss_mb(main_pid)}
    write_small_files(scratch / "rest", first, jobs - first)
    submit(env, scratch / "rest")
    wait_succeeded(db_url, jobs, timeout=3600)
    if children_of(main_pid) != [pool]:
        raise SystemExit("the pool process was replaced: RSS would not compare")
    after_all = {"pool": rss_mb(pool), "main": rss_mb(main_pid)}
    return {
        "rss_mb": {f"after_{first}": after_first, f"after_{jobs}": after_all},
        "growth_mb": {k: after_all[k] - after_first[k] for k in after_all},
    }


def storing(
    env: dict[str, str], db_url: str, scratch: Path, *, jobs: int, pool: int, result_mb: int
) -> tuple[str, dict[str, float]]:
    """The pool process's peak while one job converts, exports and stores a large result."""
    large = scratch / "large" / "large.md"
    large.parent.mkdir()
    write_large_file(large, result_mb * MB)
    before = rss_mb(pool)
    reset_peak(pool)
    (job_id,) = submit(env, large.parent)
    wait_succeeded(db_url, jobs + 1, timeout=600)
    return job_id, peak_figures(before, peak_mb(pool), result_mb)


def warm_storing(env: dict[str, str], db_url: str, work: Path, *, done: int) -> tuple[float, float]:
    """A fresh worker (one pool process) warmed by one small job, then one job of the large
    source (``--no-dedup``): the pool process's RSS before that job and its peak during it.
    ``done``: the jobs that had succeeded before."""
    work.mkdir(exist_ok=True)
    large = work.parent / "large"
    worker = start_worker(env, work / "worker.log", "--concurrency", "1", "--no-beat")
    try:
        pool = pool_process(worker.pid)
        write_small_files(work / "warm", 0, 1)
        submit(env, work / "warm", "--no-dedup")
        wait_succeeded(db_url, done + 1, timeout=300)
        before = rss_mb(pool)
        reset_peak(pool)
        submit(env, large, "--no-dedup")
        wait_succeeded(db_url, done + 2, timeout=600)
        return before, peak_mb(pool)
    finally:
        stop_worker(worker)


def through_docling_rs(
    env: dict[str, str], db_url: str, scratch: Path, code: Path, wire: str, *, done: int
) -> dict[str, Any]:
    """Storing the large source's markdown through docling-rs-mcp (a warmed worker whose pool
    process converts one job of it), then the lone client's peak on the same reply."""
    large = scratch / "large" / "large.md"
    server = RsServer(scratch / f"rs-{wire}", root=scratch)
    server.work.mkdir()
    rs_env = {k: v for k, v in env.items() if k != "DOCLING_MCP_ORIGIN"}
    rs_env |= {"DOCLANE_PROFILE": "docling-rs", "DOCLANE_ALLOWED_ROOTS": str(scratch)}
    if wire == "http":
        server.start()
        rs_env["DOCLING_MCP_ORIGIN"] = server.url
    else:
        rs_env["DOCLING_MCP_COMMAND"] = server.stdio_command()
    try:
        before, peak = warm_storing(rs_env, db_url, server.work, done=done)
        alone = reply_alone(rs_env, code, large, result_mb=0, tools="docling-rs")
    finally:
        server.stop()
    markdown_mb = alone["markdown_bytes"] / MB
    return {
        "storing": peak_figures(before, peak, markdown_mb),
        "reply_alone": alone,
        "markdown_bytes": alone["markdown_bytes"],
    }


def serving(env: dict[str, str], scratch: Path, job_id: str, result_mb: int) -> dict[str, float]:
    """``doclane api``'s peak while a client reads the large result."""
    with api_server(env, scratch / "api.log") as (api_pid, base):
        headers = {"Authorization": f"Bearer {TOKEN}"}
        httpx.get(f"{base}/v1/jobs/{job_id}", headers=headers).raise_for_status()  # warm
        before = rss_mb(api_pid)
        reset_peak(api_pid)
        size = 0
        url = f"{base}/v1/jobs/{job_id}/result/md"
        with httpx.stream("GET", url, headers=headers, timeout=120) as response:
            response.raise_for_status()
            for chunk in response.iter_raw():
                size += len(chunk)
        peak = peak_mb(api_pid)
    if size != result_mb * MB:
        raise SystemExit(f"served {size} bytes, stored {result_mb * MB}")
    return {**peak_figures(before, peak, result_mb), "bytes": size}


WIRES = ("sse", "json", "stdio")


def wire_env(env: dict[str, str], wire: str, server: FakeServer) -> dict[str, str]:
    """The lone client's environment for one wire (``json``: the fake turned stateless)."""
    server.configure(stateless=wire == "json")
    if wire != "stdio":
        return env
    command = f"{sys.executable} -m tests.fakes.server --transport stdio"
    return {k: v for k, v in env.items() if k != "DOCLING_MCP_ORIGIN"} | {
        "DOCLING_MCP_COMMAND": command
    }


def reply_alone(
    env: dict[str, str], code: Path, source: Path, result_mb: int, tools: str = "docling-mcp"
) -> dict[str, Any]:
    """The client's share of the storing peak: a fresh process (the code of checkout ``code``)
    converts and exports ``source`` with ``McpClient`` as the worker does, and nothing else.
    ``result_mb`` 0: the factor counts the markdown the server sent (docling-rs-mcp's is not
    the source byte for byte)."""
    done = subprocess.run(
        [sys.executable, "-c", ONE_REPLY, str(source), tools],
        env=env,
        cwd=code,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"the lone client failed: {done.stderr[-2000:]}")
    figures = json.loads(done.stdout.strip().splitlines()[-1])
    if result_mb and figures["markdown_bytes"] != result_mb * MB:
        raise SystemExit(f"exported {figures['markdown_bytes']} bytes, expected {result_mb * MB}")
    size_mb = result_mb or figures["markdown_bytes"] / MB
    return {
        **peak_figures(figures["before"], figures["peak"], size_mb),
        "s": figures["s"],
        "version": figures["version"],
        "markdown_bytes": figures["markdown_bytes"],
    }


#: The lone client (``python -c``, so that it imports the checkout it is run in, whichever).
ONE_REPLY = textwrap.dedent(
    """
    import json, os, sys, time
    from pathlib import Path
    from pipeline.mcp.client import McpClient

    def status(field):
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024

    source, tools = sys.argv[1], sys.argv[2]
    size = os.path.getsize(source)
    with McpClient() as client:
        client.initialize()
        client.tools()
        before = status("VmRSS")
        Path("/proc/self/clear_refs").write_text("5")
        started = time.monotonic()
        if tools == "docling-rs":
            arguments = {"uri": source, "to": "md", "options": {"compact_tables": False}}
            markdown = client.call_tool("convert", arguments, size_bytes=size).text
        else:
            converted = client.call_tool(
                "convert_document_into_docling_document", {"source": source}, size_bytes=size
            )
            key = converted.structured["document_key"]
            exported = client.call_tool(
                "export_docling_document_to_markdown", {"document_key": key}, size_bytes=size
            )
            markdown = exported.structured["markdown"]
        elapsed = time.monotonic() - started
        peak = status("VmHWM")
        version = client.negotiated_version
    print(json.dumps({"before": before, "peak": peak, "s": elapsed, "version": version,
                      "markdown_bytes": len(markdown.encode())}))
    """
)


#: ``httpx-sse`` alone on the export's reply (``python -c``; argv: result MB, "sse", "parse" or
#: "stream", chunk KiB).
SSE_ALONE = textwrap.dedent(
    """
    import json, sys
    from pathlib import Path
    import httpx
    from httpx_sse import EventSource
    from pipeline.mcp._large_reply import LargeReplyParser

    def status(field):
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024

    size, mode, chunk = int(sys.argv[1]) * 1024 * 1024, sys.argv[2], int(sys.argv[3]) * 1024
    markdown = ("result markdown worker memory table figure page text\\n" * (size // 52 + 1))[:size]
    text = json.dumps({"markdown": markdown})
    result = {
        "content": [{"type": "text", "text": text}],
        "structuredContent": {"markdown": markdown},
    }
    line = json.dumps({"jsonrpc": "2.0", "id": 3, "result": result})
    body = ("event: message\\ndata: " + line + "\\n\\n").encode()
    del markdown, text, result, line
    chunks = [body[i:i + chunk] for i in range(0, len(body), chunk)]
    del body

    class Chunks(httpx.SyncByteStream):
        def __iter__(self):
            yield from chunks

    response = httpx.Response(200, headers={"content-type": "text/event-stream"}, stream=Chunks())
    # The chunks stay counted in "before": the figure is the parser's own, a lower bound.
    before = status("VmRSS")
    Path("/proc/self/clear_refs").write_text("5")
    for event in EventSource(response).iter_sse():
        if mode == "parse":
            message = json.loads(event.data)
        elif mode == "stream":
            parser = LargeReplyParser()
            parser.feed_text(event.data)
            message = parser.finish()
    print(json.dumps({"before": before, "peak": status("VmHWM")}))
    """
)


def sse_alone(result_mb: int, chunk_kb: int = 64) -> dict[str, dict[str, float]]:
    """``httpx-sse``'s own peak on the reply, then with each way of parsing the event."""
    figures = {}
    for mode in ("sse", "parse", "stream"):
        done = subprocess.run(
            [sys.executable, "-c", SSE_ALONE, str(result_mb), mode, str(chunk_kb)],
            capture_output=True,
            text=True,
            check=True,
            cwd=ROOT,
        )
        out = json.loads(done.stdout)
        figures[mode] = peak_figures(out["before"], out["peak"], result_mb)
    return figures


def peak_figures(before: float, peak: float, result_mb: float) -> dict[str, float]:
    return {
        "rss_before_mb": before,
        "peak_mb": peak,
        "extra_mb": peak - before,
        "factor": (peak - before) / result_mb,
    }


def show(report: dict[str, Any]) -> None:
    print(f"checkout {report['checkout']}:")
    peaks: dict[str, dict[str, float]] = {}
    if "rss_mb" in report:  # the fake server's figures (not with --only-docling-rs)
        rss, growth = report["rss_mb"], report["growth_mb"]
        for label, figures in rss.items():
            print(f"{label:>12}: pool {figures['pool']:.1f} MB, main {figures['main']:.1f} MB")
        print(
            f"      growth: pool {growth['pool']:+.1f} MB, main {growth['main']:+.1f} MB "
            f"(goal < {GROWTH_GOAL_MB} MB)"
        )
        peaks = {"storing": report["storing"], "serving": report["serving"]}
        peaks |= {f"store {wire}": f for wire, f in report["storing_wires"].items()}
        peaks |= {f"reply {wire}": figures for wire, figures in report["reply_alone"].items()}
    for wire, rs in report.get("docling_rs", {}).items():
        if "error" in rs:
            print(f"docling-rs-mcp over {wire}: {rs['error']}")
            continue
        peaks |= {f"rs {wire} store": rs["storing"], f"rs {wire} reply": rs["reply_alone"]}
    for what, f in peaks.items():
        print(
            f"{what:>12}: RSS {f['rss_before_mb']:.1f} MB -> peak {f['peak_mb']:.1f} MB, "
            f"+{f['extra_mb']:.1f} MB = {f['factor']:.2f}x the result (goal < {PEAK_FACTOR_GOAL}x)"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--result-mb", type=int, default=50)
    parser.add_argument("--smoke", action="store_true", help="12 jobs, a 2 MB result (CI)")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--keep", action="store_true", help="keep the scratch folders (logs)")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--sse-alone", action="store_true", help="httpx-sse's own peak only")
    parser.add_argument("--sse-chunk-kb", type=int, default=64, help="--sse-alone's chunks")
    parser.add_argument(
        "--docling-rs", action="store_true", help="also store the result through docling-rs-mcp"
    )
    parser.add_argument(
        "--only-docling-rs", action="store_true", help="the docling-rs-mcp rows alone"
    )
    parser.add_argument(
        "--compare-with", type=Path, help="another checkout whose code runs before each round"
    )
    args = parser.parse_args()
    if args.smoke:
        args.jobs, args.result_mb = 12, 2
    if args.sse_alone:
        figures = sse_alone(args.result_mb, args.sse_chunk_kb)
        if args.json:
            print(json.dumps({"result_mb": args.result_mb, "sse_alone": figures}))
        for mode, f in figures.items() if not args.json else ():
            print(
                f"{mode:>6}: +{f['extra_mb']:.1f} MB = {f['factor']:.2f}x the {args.result_mb} MB"
            )
        return
    checkouts = [args.compare_with.resolve()] if args.compare_with else []
    checkouts.append(ROOT)
    reports = []
    for _round in range(args.rounds):
        for code in checkouts:
            scratch = Path(tempfile.mkdtemp(prefix="doclane-bench-memory-"))
            try:
                reports.append(
                    measure(
                        args.jobs,
                        args.result_mb,
                        scratch,
                        code,
                        docling_rs=args.docling_rs or args.only_docling_rs,
                        fake=not args.only_docling_rs,
                    )
                )
            finally:
                if not args.keep:
                    shutil.rmtree(scratch, ignore_errors=True)
    if args.json:
        print(json.dumps(reports if len(reports) > 1 else reports[0], indent=2))
    else:
        for report in reports:
            show(report)


if __name__ == "__main__":
    main()
