"""The move to drains on a live database: jobs queued, running under workers of the old code
that stopped mid-run, retrying, and owed to a queue, before the migration; after it, the new
code's reconciler and claims finish every job exactly once, and the old attempts write nothing."""

from __future__ import annotations

import shutil
from pathlib import Path

import psycopg
import pytest

from pipeline.jobs.model import JobState
from pipeline.queues import QUEUE_MEDIUM, QUEUE_SMALL, RecordingPublisher
from pipeline.reconciler.sweeps import reconcile_once
from pipeline.settings.tree import read_settings
from pipeline.store.database import apply_migrations
from pipeline.store.settings import DEFAULT_MIGRATIONS_DIR
from pipeline.store.store import JobStore
from tests.support.store_builders import drain_queue

#: The last migration the old code knew: the one whose debts and claim rights the move drops.
OLD_LAST = "0020_fair_claims.sql"


def old_schema(tmp_path: Path) -> Path:
    folder = tmp_path / "old-migrations"
    folder.mkdir()
    for path in sorted(DEFAULT_MIGRATIONS_DIR.glob("*.sql")):
        shutil.copy(path, folder / path.name)
        if path.name == OLD_LAST:
            break
    return folder


@pytest.fixture
def old_database(empty_database_url: str, tmp_path: Path) -> str:
    apply_migrations(
        read_settings(
            store=dict(database_url=empty_database_url, migrations_dir=old_schema(tmp_path))
        ).store
    )
    return empty_database_url


def test_jobs_queued_running_retrying_and_owed_are_all_finished_once_after_the_move(
    old_database: str,
) -> None:
    with psycopg.connect(old_database, autocommit=True) as old:
        old.execute("INSERT INTO tenants (name, max_running) VALUES ('capped', 1)")
        ids = [
            row[0]
            for row in old.execute(
                "INSERT INTO jobs (source_kind, source_uri, size_bytes, profile, formats, queue,"
                " tenant, created_at)"
                " SELECT 'file', '/inbox/' || g || '.md', 100, 'auto', '{md}',"
                " CASE WHEN g > 8 THEN %s ELSE %s END,"
                " CASE WHEN g > 8 THEN 'capped' ELSE 'default' END,"
                " now() - interval '1 hour' + g * interval '1 ms'"
                " FROM generate_series(1, 12) g RETURNING id",
                [QUEUE_MEDIUM, QUEUE_SMALL],
            )
        ]
        # workers of the old code: each message's claim (0020's claim_next) takes the fair
        # order's next job; three of them stop mid-run, one schedules a retry, and a claim
        # that finds only the capped tenant's work owes its message to the queue
        stopped = []
        for _ in range(3):
            row = old.execute(
                "SELECT id, attempt FROM claim_next(%s, 'old-worker', 60, 1, 0)", [ids[0]]
            ).fetchone()
            assert row is not None
            stopped.append(row)
        retried = old.execute(
            "SELECT id, attempt FROM claim_next(%s, 'old-worker', 60, 1, 0)", [ids[0]]
        ).fetchone()
        assert retried is not None
        old.execute(
            "UPDATE jobs SET state = 'retrying', next_attempt_at = now() - interval '1 s',"
            " lease_owner = NULL, lease_expires_at = NULL WHERE id = %s",
            [retried[0]],
        )
        old.execute(
            "UPDATE jobs SET lease_expires_at = now() - interval '1 s' WHERE id = ANY(%s)",
            [[job_id for job_id, _ in stopped]],
        )
        old.execute(
            "SELECT count(*) FROM claim_jobs(ARRAY(SELECT id FROM jobs WHERE tenant = 'capped'"
            " AND state = 'queued' ORDER BY created_at LIMIT 1), 'old-worker', 60, 'validating')"
        )
        capped_run = old.execute(
            "SELECT id, attempt FROM jobs WHERE tenant = 'capped' AND state = 'running'"
        ).fetchone()
        assert capped_run is not None
        old.execute("SELECT count(*) FROM claim_next(%s, 'old-worker', 60, 1, 0)", [ids[-1]])
        (owed,) = old.execute("SELECT coalesce(sum(owed), 0) FROM queue_debts").fetchone()  # type: ignore[misc]
        assert owed >= 1, "a message owed to the queue before the move"

    settings = read_settings(
        store=dict(database_url=old_database, migrations_dir=DEFAULT_MIGRATIONS_DIR)
    )
    apply_migrations(settings.store)
    store = JobStore(settings.store)
    try:
        publisher = RecordingPublisher(depths={QUEUE_SMALL: 0, QUEUE_MEDIUM: 0})
        report = reconcile_once(store, publisher)
        assert sorted(report.requeued) == sorted(job_id for job_id, _ in stopped)
        assert report.rung.get(QUEUE_SMALL, 0) > 0, "the move's work is rung for"
        # the old worker of the capped tenant's job comes back and finishes it: its attempt is
        # still the job's, so its finish stands
        job_id, attempt = capped_run
        assert store.attempts.finish(job_id, attempt, {"md": "# old worker's"})
        # the stopped ones' late finishes write nothing: their attempts are not the jobs' any more
        for job_id, attempt in stopped:
            assert not store.attempts.finish(job_id, attempt, {"md": "# stale"})

        assert reconcile_once(store, publisher).rung.get(QUEUE_MEDIUM) == 1, "room again"
        finished = 1 + sum(
            drain_queue(store, queue, "new-worker", "# n") for queue in (QUEUE_SMALL, QUEUE_MEDIUM)
        )

        jobs = store.reads.get_jobs(ids)
        assert {job.state for job in jobs} == {JobState.SUCCEEDED} and finished == len(ids)
        with psycopg.connect(old_database) as conn:
            counts = conn.execute(
                "SELECT job_id, count(*) FROM job_events WHERE kind = 'state_change'"
                " AND to_state = 'succeeded' GROUP BY job_id"
            ).fetchall()
            assert len(counts) == len(ids) and {n for _, n in counts} == {1}, "each once"
            assert conn.execute("SELECT to_regclass('queue_debts')").fetchone() == (None,)
    finally:
        store.close()
