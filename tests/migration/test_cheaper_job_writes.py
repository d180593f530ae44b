"""Migration 0025 on a live database: jobs queued, running, retrying and finished under the
triggers before it; after it, every one goes on under the new triggers with the same guarantees
(the running attempts finish under their fence, a stale one writes nothing, each change of state
is in the trail once, the lanes count the rows, a finished job refuses any change)."""

from __future__ import annotations

import shutil
from pathlib import Path

import psycopg
import pytest
from psycopg import errors as pg_errors

from errors import ServerUnavailable
from pipeline.jobs.model import JobState
from pipeline.queues import QUEUE_SMALL
from pipeline.settings.tree import read_settings
from pipeline.store.database import apply_migrations
from pipeline.store.rows import AttemptResults
from pipeline.store.settings import DEFAULT_MIGRATIONS_DIR
from pipeline.store.store import JobStore
from tests.support.store_builders import drain_queue

#: The last migration before the one under test.
OLD_LAST = "0024_failed_stage.sql"


@pytest.fixture
def old_database(empty_database_url: str, tmp_path: Path) -> str:
    folder = tmp_path / "old-migrations"
    folder.mkdir()
    for path in sorted(DEFAULT_MIGRATIONS_DIR.glob("*.sql")):
        shutil.copy(path, folder / path.name)
        if path.name == OLD_LAST:
            break
    settings = read_settings(store=dict(database_url=empty_database_url, migrations_dir=folder))
    apply_migrations(settings.store)
    return empty_database_url


def test_jobs_in_every_state_go_on_under_the_new_triggers(old_database: str) -> None:
    with psycopg.connect(old_database, autocommit=True) as old:
        old.execute(
            "INSERT INTO jobs (source_kind, source_uri, size_bytes, profile, formats, queue)"
            " SELECT 'file', '/inbox/' || g || '.md', 100, 'auto', '{md}', %s"
            " FROM generate_series(1, 8) g",
            [QUEUE_SMALL],
        )
        claimed = old.execute(
            "SELECT (c.job).id, (c.job).attempt FROM claim_queue(%s, 5, 'old-worker', 60,"
            " 'validating') c WHERE c.found = 'claimed'",
            [QUEUE_SMALL],
        ).fetchall()
        assert len(claimed) == 1  # not small enough for companions: the lead alone
        claimed += old.execute(
            "SELECT id, attempt FROM claim_jobs(ARRAY(SELECT id FROM jobs WHERE state = 'queued'"
            " ORDER BY created_at LIMIT 4), 'old-worker', 60, 'validating')"
        ).fetchall()
        (done, done_attempt), (retried, _), (stale, stale_attempt), running, stopped = claimed
        assert old.execute(
            "SELECT finish_attempt(%s, %s, '{md}', '{# old}', NULL, NULL)", [done, done_attempt]
        ).fetchone() == (["md"],)
        old.execute(
            "UPDATE jobs SET state = 'retrying', next_attempt_at = now() - interval '1 s'"
            " WHERE id = %s",
            [retried],
        )
        # the stale attempt's job was requeued (its worker looked dead) and claimed again
        old.execute("UPDATE jobs SET state = 'queued' WHERE id = %s", [stale])
        old.execute(
            "SELECT count(*) FROM claim_jobs(ARRAY[%s]::uuid[], 'other', 60, NULL)", [stale]
        )

    settings = read_settings(
        store=dict(database_url=old_database, migrations_dir=DEFAULT_MIGRATIONS_DIR)
    )
    apply_migrations(settings.store)
    store = JobStore(settings.store)
    try:
        assert store.attempts.renew_lease(running[0], running[1], 60)
        assert (
            store.attempts.schedule_retry(
                stopped[0], stopped[1], ServerUnavailable("HTTP 503"), delay=0
            )
            is JobState.RETRYING
        )
        assert store.attempts.finish_together(
            [
                AttemptResults(running[0], running[1], {"md": "# running"}),
                AttemptResults(stale, stale_attempt, {"md": "# stale"}),
            ]
        ) == [True, False], "the running attempt's fence stands; the stale one writes nothing"
        finished = 1 + 1 + drain_queue(store, QUEUE_SMALL, "new-worker", "# new")
        stale_job = store.reads.get_job(stale)
        assert stale_job is not None and stale_job.state is JobState.RUNNING
        assert store.attempts.finish(stale, stale_attempt + 1, {"md": "# other"})
        assert finished + 1 == 8

        with psycopg.connect(old_database, autocommit=True) as conn:
            assert conn.execute("SELECT DISTINCT state FROM jobs").fetchall() == [("succeeded",)]
            counts = conn.execute(
                "SELECT job_id, count(*) FILTER (WHERE to_state = 'succeeded'),"
                " count(*) FILTER (WHERE to_state = 'running'),"
                " count(*) FILTER (WHERE from_state = 'running' AND to_state <> 'succeeded')"
                " FROM job_events WHERE kind = 'state_change' GROUP BY job_id"
            ).fetchall()
            assert len(counts) == 8 and {n for _, n, _, _ in counts} == {1}, "each once"
            for _, _, runs, left in counts:
                assert runs == left + 1, "every claim and every way out of running logged"
            assert conn.execute("SELECT recount_tenant_lanes()").fetchone() == (0,)
            with pytest.raises(pg_errors.CheckViolation, match="terminal"):
                conn.execute("UPDATE jobs SET lease_expires_at = now() WHERE id = %s", [done])
    finally:
        store.close()
