"""Results of tens of megabytes: stored and read back intact, without needless copies in memory."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from pipeline.jobs.model import Job, JobState
from pipeline.store.store import JobStore

REPO = Path(__file__).resolve().parents[3]
MIB = 1024 * 1024


def test_a_50_mb_markdown_result_round_trip(migrated_database_url: str) -> None:
    """Measured in a process of its own, so the peaks are the round trip's alone."""
    probe = subprocess.run(
        [
            sys.executable,
            "-m",
            "tests.integration.store.large_result_probe",
            migrated_database_url,
            "50",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert probe.returncode == 0, probe.stderr
    report = json.loads(probe.stdout)
    print("\n50 MB result:", json.dumps(report, indent=1))
    size = report["content_bytes"]
    assert size >= 50 * MIB - 200
    assert report["stored"] is True
    assert report["stored_size_bytes"] == size
    assert report["get_result_equal"] is True
    assert report["write_result_equal"] is True and report["write_result_bytes"] == size
    # Writing streams the content a slice at a time: far less than one extra copy of it.
    assert report["finish_peak_extra_bytes"] < size / 4
    # Reading: libpq's input buffer and its result, plus the str (get) or nothing (write).
    assert report["get_result_peak_extra_bytes"] < 3.5 * size
    assert report["write_result_peak_extra_bytes"] < 2.5 * size


def test_results_are_listed_without_their_content(
    job_factory: Callable[..., Job], store: JobStore
) -> None:
    job = job_factory(JobState.RUNNING, formats=("md", "json", "html"))
    contents = {"md": "# Café\n\n| a | b |\n", "json": '{"k": "ü"}', "html": ""}
    assert store.attempts.finish(job.id, job.attempt, contents)
    listed = {r.format: (r.size_bytes, r.attempt) for r in store.reads.list_results(job.id)}
    assert listed == {f: (len(c.encode()), job.attempt) for f, c in contents.items()}
    for fmt, content in contents.items():
        assert store.reads.get_result(job.id, fmt) == content
        out = io.BytesIO()
        assert store.reads.write_result(job.id, fmt, out) == len(content.encode())
        assert out.getvalue().decode() == content


def test_a_missing_result_is_none(job_factory: Callable[..., Job], store: JobStore) -> None:
    job = job_factory(JobState.SUCCEEDED)
    assert store.reads.get_result(job.id, "docx") is None
    out = io.BytesIO()
    assert store.reads.write_result(job.id, "docx", out) is None
    assert out.getvalue() == b""
