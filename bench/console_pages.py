"""Are the console's pages fast at a million jobs? Server time of the job list and a job's page.

Fills a scratch database with ``--jobs`` synthetic jobs (the store benches' history from
``bench.harness.store``: one ``generate_series`` statement, 30 days, nine in ten succeeded, the
rest failed with one of seven codes or cancelled, ``--active`` of the newest in flight), gives
the jobs it opens a history and a markdown result, then asks the console itself, in process (no
network between), signed in, for:

- the list: newest first; page 200 (by the keyset cursor); failed jobs; one error code; a queue;
  one submission, its first page and its page 20 (every job is given a submission: one an hour,
  about 1,400 jobs each at a million);
- a job's page: a failed job (its error explained, its history), a succeeded one (its
  markdown rendered and sanitised, as text, its downloads).

Each page is asked ``--requests`` times after one warm-up; the median and worst are reported in
milliseconds. The goal is under 100 ms for each at 1,000,000 jobs.

    .venv/bin/python -m bench.console_pages [--jobs 1000000] [--requests 20] [--json] [--keep]

The scratch database (``doclane_bench_console_<pid>``) is dropped at the end unless ``--keep``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from typing import Any
from uuid import UUID

import psycopg
from fastapi.testclient import TestClient

from bench.harness.store import bench_arguments, in_scratch_database, synthetic_history
from pipeline.api.context import ApiContext
from pipeline.queues import Wakeup
from pipeline.settings.tree import read_settings
from pipeline.site import create_site
from pipeline.store.admin import JobFilter
from pipeline.store.database import apply_migrations
from pipeline.store.store import JobStore

#: A job's history as a worker writes it: claimed, two MCP calls, finished.
LOAD_HISTORY = """
INSERT INTO job_events (job_id, attempt, kind, from_state, to_state, tool, duration_ms, outcome,
                        error_code, at)
SELECT %(job_id)s, 1, e.kind, e.from_state, e.to_state, e.tool, e.ms, e.outcome, e.code,
       now() - make_interval(secs => 10 - e.n)
FROM (VALUES
    (1, 'state_change', 'queued', 'running', NULL, NULL, NULL, NULL),
    (2, 'mcp_call', NULL, NULL, 'convert_document_into_docling_document', 812.0, 'ok', NULL),
    (3, 'mcp_call', NULL, NULL, 'export_docling_document_to_markdown', 35.0, %(outcome)s,
     %(code)s),
    (4, 'state_change', 'running', %(state)s, NULL, NULL, NULL, %(code)s)
) AS e(n, kind, from_state, to_state, tool, ms, outcome, code)
"""

#: About 70 KB of markdown: headings, paragraphs and a table, as Docling writes them.
MARKDOWN = "\n\n".join(
    f"## Section {n}\n\nSome **converted** text of section {n}, with a [link](https://x.test).\n\n"
    "| a | b |\n|---|---|\n| 1 | 2 |"
    for n in range(600)
)


#: Every job in a submission of its hour (jobs_submission_idx is what the filter reads).
SUBMISSIONS = """
UPDATE jobs SET submission_id = md5('submission ' || date_trunc('hour', created_at))::uuid
"""


class _NoPublisher:
    def publish(self, message: Wakeup) -> None:  # the bench never retries
        raise AssertionError(f"unexpected publish of {message}")

    def waiting(self, queue: str) -> int | None:
        return None  # no broker: the pages show the depth as unknown


def main() -> None:
    parser = bench_arguments(__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=20, help="requests per page")
    args = parser.parse_args()
    report = in_scratch_database(args, "doclane_bench_console", run)
    print(json.dumps(report, indent=1) if args.json else _table(report))


def run(url: str, args: argparse.Namespace) -> dict[str, Any]:
    apply_migrations(read_settings(store=dict(database_url=url)).store)
    started = time.perf_counter()
    with psycopg.connect(url, autocommit=True) as conn:
        with synthetic_history(conn, args.jobs, min(args.active, args.jobs // 10)):
            conn.execute(SUBMISSIONS)
            failed, succeeded = _opened_jobs(conn)
        conn.execute("VACUUM ANALYZE jobs")
    load_s = time.perf_counter() - started
    store = JobStore(read_settings(store=dict(database_url=url)).store, explain_missing_schema=True)
    try:
        with _console(store) as client:
            submission = f"/console/jobs?submission={_newest_submission(store)}"
            pages = {
                "list: newest": "/console/jobs",
                "list: page 200": _page_after(client, "/console/jobs", pages=200),
                "list: failed": "/console/jobs?state=failed",
                "list: failed E303": "/console/jobs?state=failed&error_code=E303",
                "list: error code E303": "/console/jobs?error_code=E303",
                "list: queue doclane.large": "/console/jobs?queue=doclane.large",
                "list: a submission": submission,
                "list: a submission, page 20": _page_after(client, submission, pages=20),
                "job: failed, its history": f"/console/jobs/{failed}",
                "job: succeeded, its markdown": f"/console/jobs/{succeeded}",
            }
            timings = {label: _time(client, path, args.requests) for label, path in pages.items()}
    finally:
        store.close()
    return {"jobs": args.jobs, "load_s": round(load_s, 1), "pages_ms": timings}


def _opened_jobs(conn: psycopg.Connection) -> tuple[UUID, UUID]:
    """The failed and the succeeded job the bench opens, given a history and a result."""
    row = conn.execute(
        "SELECT (SELECT id FROM jobs WHERE state = 'failed' ORDER BY created_at DESC LIMIT 1),"
        " (SELECT id FROM jobs WHERE state = 'succeeded' ORDER BY created_at DESC LIMIT 1)"
    ).fetchone()
    assert row is not None
    failed, succeeded = row
    for job_id, state, outcome, code in (
        (failed, "failed", "error", "E307"),
        (succeeded, "succeeded", "ok", None),
    ):
        params = {"job_id": job_id, "state": state, "outcome": outcome, "code": code}
        conn.execute(LOAD_HISTORY, params)
    conn.execute(
        "INSERT INTO results (job_id, format, attempt, content) VALUES (%s, 'md', 1, %s)",
        (succeeded, MARKDOWN),
    )
    return failed, succeeded


class _console:
    """A signed-in client of the API's app on this store, in process."""

    def __init__(self, store: JobStore) -> None:
        token = "bench-token"
        ctx = ApiContext(
            tree=read_settings(api=dict(api_token=token)),
            store=store,
            publisher=_NoPublisher(),
            fleet=None,
        )
        self.client = TestClient(create_site(ctx), base_url="http://127.0.0.1")
        self.token = token

    def __enter__(self) -> TestClient:
        answer = self.client.post("/console/login", data={"token": self.token})
        assert answer.status_code == 200 and "console/login" not in str(answer.url), answer.text
        return self.client

    def __exit__(self, *exc: object) -> None:
        self.client.close()


def _newest_submission(store: JobStore) -> str:
    [newest] = store.admin.list_jobs(JobFilter(limit=1))
    return str(newest.submission_id)


def _page_after(client: TestClient, path: str, *, pages: int) -> str:
    """The URL of the list's page ``pages`` deep from ``path`` (or its last), link by link."""
    html = client.get(path).text
    marker = 'id="next-page" rel="next"'
    for _ in range(pages - 1):
        if marker not in html:
            break
        start = html.index(marker)
        href = html.rindex('href="', 0, start) + len('href="')
        path = html[href : html.index('"', href)].replace("&amp;", "&")
        html = client.get(path).text
    return path


def _time(client: TestClient, path: str, requests: int) -> dict[str, float]:
    assert client.get(path).status_code == 200, path  # warm-up: plans, pool, templates
    took = []
    for _ in range(requests):
        started = time.perf_counter()
        answer = client.get(path)
        took.append((time.perf_counter() - started) * 1000)
        assert answer.status_code == 200, (path, answer.status_code)
    return {"median": round(statistics.median(took), 1), "worst": round(max(took), 1)}


def _table(report: dict[str, Any]) -> str:
    lines = [f"{report['jobs']:,} jobs (loaded in {report['load_s']} s); server time, ms:"]
    lines += [
        f"  {label:<30} median {t['median']:>7.1f}   worst {t['worst']:>7.1f}"
        for label, t in report["pages_ms"].items()
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
