"""The convert task's retry, as doclane's glue sends it, lands in the broker where it should.

The task body is doclane's: it runs the processor and turns a RETRY outcome into
``self.retry(countdown=..., throw=False)``. Here the processor is replaced by one that answers
RETRY (the only stand-in: what is tested is the glue and the broker, not the processor), the
task runs inside a request as a worker would deliver it (priority level 3 on a Redis broker),
and the test reads the retry message out of the real Redis list of that level.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from uuid import UUID, uuid4

import pytest
import redis
from celery import Celery

from pipeline.processing import Outcome, OutcomeKind
from pipeline.queues import QUEUE_SMALL
from pipeline.settings import read_settings
from tests.fixtures.brokers import REDIS_HOST, REDIS_PORT, Broker
from workers import runtime
from workers.app import create_app
from workers.publisher import CONVERT_TASK


@dataclass
class RetryingProcessor:
    countdown_s: float

    def process(self, job_id: UUID) -> Outcome:
        return Outcome(OutcomeKind.RETRY, job_id, 1, "E302", "down", self.countdown_s)


@dataclass
class StubRuntime:
    processor: RetryingProcessor


@pytest.fixture
def app(redis_broker: Broker) -> Iterator[Celery]:
    made = create_app(read_settings(worker=dict(broker_url=redis_broker.url)))
    yield made
    made.close()


def test_a_retry_outcome_is_resent_at_its_delivered_level_with_its_countdown(
    app: Celery, redis_broker: Broker, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(runtime._state, "runtime", StubRuntime(RetryingProcessor(42.0)))
    task = app.tasks[CONVERT_TASK]
    job_id = str(uuid4())
    task.push_request(
        id=job_id,
        args=[job_id],
        kwargs={},
        retries=0,
        called_directly=False,
        delivery_info={"priority": 3, "exchange": "", "routing_key": QUEUE_SMALL},
    )
    try:
        # Sent, not raised: the task returns (a raised Retry costs a copy of the traceback).
        assert task.run(job_id) is None
    finally:
        task.pop_request()

    client = redis.Redis(host=REDIS_HOST, port=REDIS_PORT, db=redis_broker.redis_db)
    try:
        sep = app.conf.broker_transport_options["sep"]
        level_key = f"{QUEUE_SMALL}{sep}3"
        [raw] = client.lrange(level_key, 0, -1)
        others = [k for k in client.keys(f"{QUEUE_SMALL}*") if k.decode() != level_key]
        assert not any(client.llen(k) for k in others), "the retry went to another level"
    finally:
        client.close()
    message = json.loads(raw)
    headers = message["headers"]
    assert (headers["id"], headers["task"], headers["retries"]) == (job_id, CONVERT_TASK, 1)
    assert headers["eta"], "the countdown became the message's eta"
    assert message["properties"]["priority"] == 3
