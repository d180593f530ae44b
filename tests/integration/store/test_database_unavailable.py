"""A database that cannot be reached is E401 (retryable) from every store call, cause kept."""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterator
from uuid import uuid4

import psycopg
import pytest

from errors import DatabaseUnavailable, classify
from pipeline.jobs.model import Stage
from pipeline.settings.tree import read_settings
from pipeline.store.store import JobStore
from tests.support.store_builders import new_job


@pytest.fixture
def unreachable_store() -> Iterator[JobStore]:
    """A store whose database port has nothing listening (a port bound, never listened on)."""
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        port = held.getsockname()[1]
        settings = read_settings(
            store=dict(
                database_url=f"postgresql://postgres:secret@127.0.0.1:{port}/doclane",
                pool_timeout_s=0.5,
                connect_timeout_s=1,
            )
        ).store
        store = JobStore(settings)  # opening does not wait for the database
        yield store
        store.close()


@pytest.mark.parametrize(
    "call",
    [
        lambda s: s.submissions.create(new_job()),
        lambda s: s.attempts.claim(uuid4(), "worker-a", lease_s=60),
        lambda s: s.attempts.finish(uuid4(), 1, {"md": "x"}),
        lambda s: s.attempts.set_stage(uuid4(), 1, Stage.CONVERTING),
        lambda s: s.operations.requeue_expired_leases(),
        lambda s: s.reads.get_job(uuid4()),
        lambda s: s.pool.ping(),
    ],
    ids=["create", "claim", "finish", "set_stage", "requeue", "get_job", "ping"],
)
def test_every_call_raises_e401(
    unreachable_store: JobStore, call: Callable[[JobStore], object]
) -> None:
    with pytest.raises(DatabaseUnavailable) as raised:
        call(unreachable_store)
    error = raised.value
    assert error.code == "E401" and error.retryable
    assert classify(error) is error
    assert isinstance(error.__cause__, psycopg.OperationalError)
    assert "secret" not in str(error)
