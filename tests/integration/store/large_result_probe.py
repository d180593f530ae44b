"""Round-trip one large markdown result through the store and report peak memory per step.

Run in its own process (``python -m tests.integration.store.large_result_probe URL MB``) so the
peak resident set size it reports is this round trip's and nothing else's. Linux lets a process
reset its peak (``/proc/self/clear_refs``), so each step is measured on its own. Prints one JSON
object.
"""

from __future__ import annotations

import hashlib
import json
import sys
import tempfile
import time
from pathlib import Path

from pipeline.jobs.model import NewJob, SourceKind
from pipeline.settings.tree import read_settings
from pipeline.store.store import JobStore

MIB = 1024 * 1024


def peak_rss() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmHWM in /proc/self/status")


def current_rss() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


def reset_peak() -> int:
    Path("/proc/self/clear_refs").write_text("5")
    return current_rss()


def markdown_of_size(size: int) -> str:
    """Markdown with headings, tables and non-ASCII text: ``size`` UTF-8 bytes or a bit less."""
    block = (
        "## Section\n\nCafé au lait, naïve façade: the quick brown fox jumps over the lazy dog.\n\n"
        "| column a | column b |\n|---|---|\n| 1 | 2 |\n\n"
    )
    repeats = size // len(block.encode())
    return "# Large document\n\n" + block * repeats


def main(database_url: str, megabytes: int) -> dict[str, float | int | bool]:
    content = markdown_of_size(megabytes * MIB)
    expected_sha = hashlib.sha256(content.encode()).hexdigest()
    size = len(content.encode())
    report: dict[str, float | int | bool] = {"content_bytes": size}
    with JobStore(
        read_settings(store=dict(database_url=database_url, pool_max_size=1)).store
    ) as store:
        spec = NewJob(source_kind=SourceKind.FILE, source_uri="/big.docx", queue="doclane.large")
        job_id = store.submissions.create(spec).job_id
        job = store.attempts.claim(job_id, "probe", lease_s=600)
        assert job is not None

        base = reset_peak()
        started = time.perf_counter()
        report["stored"] = store.attempts.finish(job_id, job.attempt, {"md": content})
        report["finish_s"] = time.perf_counter() - started
        report["finish_peak_extra_bytes"] = peak_rss() - base

        base = reset_peak()
        started = time.perf_counter()
        back = store.reads.get_result(job_id, "md")
        report["get_result_s"] = time.perf_counter() - started
        report["get_result_peak_extra_bytes"] = peak_rss() - base
        report["get_result_equal"] = back == content
        del back

        with tempfile.TemporaryFile() as out:
            base = reset_peak()
            started = time.perf_counter()
            report["write_result_bytes"] = store.reads.write_result(job_id, "md", out) or 0
            report["write_result_s"] = time.perf_counter() - started
            report["write_result_peak_extra_bytes"] = peak_rss() - base
            out.seek(0)
            digest = hashlib.sha256()
            while chunk := out.read(MIB):
                digest.update(chunk)
            report["write_result_equal"] = digest.hexdigest() == expected_sha
        stored = store.reads.list_results(job_id)
        report["stored_size_bytes"] = stored[0].size_bytes if stored else -1
    return report


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1], int(sys.argv[2]))))
