"""Delivery passes against a real receiver that verifies with Standard Webhooks' own library."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path
from uuid import UUID

from pipeline.jobs.model import JobState
from pipeline.jobs.request import SubmissionRequest
from pipeline.queues import RecordingPublisher
from pipeline.settings.tree import read_settings
from pipeline.store.outbox import DeliveryState, WebhookOutbox
from pipeline.store.store import JobStore
from pipeline.submission.intake import enqueue
from pipeline.webhooks.delivery import WebhookDispatcher
from tests.fixtures.waiting import wait_for
from tests.fixtures.webhook_receiver import WebhookReceiver
from tests.support.store_builders import job_in_state

Dispatchers = Callable[..., WebhookDispatcher]


def test_an_event_arrives_signed_and_verifiable(
    store: JobStore, webhook_receiver: WebhookReceiver, make_dispatcher: Dispatchers
) -> None:
    job = job_in_state(store, JobState.SUCCEEDED, webhook_url=webhook_receiver.url)
    dispatcher = make_dispatcher(public_api_url="https://doclane.example.org/")
    report = dispatcher.deliver_due()
    [received] = webhook_receiver.requests
    assert received.verify_error is None and received.status == 204
    assert [str(i) for i in report.delivered] == [received.event_id]
    assert received.event is not None
    assert received.event["type"] == "job.succeeded"
    assert received.event["data"]["results"] == [
        {
            "format": "md",
            "path": f"/v1/jobs/{job.id}/result/md",
            "url": f"https://doclane.example.org/v1/jobs/{job.id}/result/md",
        }
    ]
    assert dispatcher.deliver_due().delivered == []  # delivered once: nothing is due any more


def test_a_receiver_that_refuses_gets_every_event_once_accepted_with_one_id_each(
    store: JobStore, webhook_receiver: WebhookReceiver, make_dispatcher: Dispatchers
) -> None:
    jobs = [
        job_in_state(store, state, webhook_url=webhook_receiver.url)
        for state in (JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED)
    ]
    webhook_receiver.refuse(7)
    dispatcher = make_dispatcher()
    wait_for(
        lambda: dispatcher.deliver_due() and len(webhook_receiver.accepted) == len(jobs),
        message="every event accepted",
    )
    refused = [r for r in webhook_receiver.requests if r.status == 503]
    assert len(refused) == 7 and all(r.verify_error is None for r in webhook_receiver.requests)
    accepted = webhook_receiver.accepted
    assert sorted(r.event["data"]["job_id"] for r in accepted) == sorted(  # type: ignore[index]
        str(j.id) for j in jobs
    )
    assert len({r.event_id for r in accepted}) == len(jobs)
    # Every refused try was the same event again: its id is one of the accepted ones, and an
    # id always comes with the same body.
    bodies = {r.event_id: r.event for r in accepted}
    assert all(bodies[r.event_id] == r.event for r in refused)
    assert dispatcher.outbox.counts().failed == 0


def test_a_receiver_that_is_down_is_tried_again_until_it_is_up(
    store: JobStore, webhook_receiver: WebhookReceiver, make_dispatcher: Dispatchers
) -> None:
    job_in_state(store, JobState.SUCCEEDED, webhook_url="http://127.0.0.1:9/nobody-listens")
    dispatcher = make_dispatcher()
    report = dispatcher.deliver_due()
    assert report.failed and not report.delivered
    counts = dispatcher.outbox.counts()
    assert (counts.failed, counts.dead) == (1, 0)
    [row] = dispatcher.outbox.listing(DeliveryState.PENDING)
    assert row.last_status is None and "Connect" in (row.last_error or "")


def test_a_delivery_that_fails_past_the_give_up_time_is_dead(
    store: JobStore, webhook_receiver: WebhookReceiver, make_dispatcher: Dispatchers
) -> None:
    job_in_state(store, JobState.FAILED, webhook_url=webhook_receiver.url)
    webhook_receiver.refuse(1)
    dispatcher = make_dispatcher(webhook_give_up_s=0.001)
    assert len(dispatcher.deliver_due().dead) == 1
    assert dispatcher.outbox.counts().dead == 1
    assert dispatcher.outbox.revive(DeliveryState.DEAD)
    assert len(make_dispatcher().deliver_due().delivered) == 1
    assert len(webhook_receiver.accepted) == 1


def test_a_loopback_receiver_is_refused_unless_private_urls_are_allowed(
    store: JobStore, webhook_receiver: WebhookReceiver, make_dispatcher: Dispatchers
) -> None:
    job_in_state(store, JobState.SUCCEEDED, webhook_url=webhook_receiver.url)
    report = make_dispatcher(allow_private=False).deliver_due()
    assert len(report.dead) == 1 and webhook_receiver.requests == []
    [row] = WebhookOutbox(store.pool).listing(DeliveryState.DEAD)
    assert "loopback" in (row.last_error or "")


def test_without_a_secret_nothing_is_sent_unsigned(
    store: JobStore, webhook_receiver: WebhookReceiver, make_dispatcher: Dispatchers
) -> None:
    job_in_state(store, JobState.SUCCEEDED, webhook_url=webhook_receiver.url)
    report = make_dispatcher(webhook_secret=None).deliver_due()
    assert report.idle_reason and "DOCLANE_WEBHOOK_SECRET" in report.idle_reason
    assert webhook_receiver.requests == []
    assert WebhookOutbox(store.pool).counts().pending == 1


def test_a_submission_deduplicated_onto_an_ended_job_is_told_at_once(
    store: JobStore,
    webhook_receiver: WebhookReceiver,
    make_dispatcher: Dispatchers,
    tmp_path: Path,
) -> None:
    doc = tmp_path / "same.md"
    doc.write_bytes(b"# The same content\n")
    ended = job_in_state(
        store, JobState.SUCCEEDED, content_sha256=hashlib.sha256(doc.read_bytes()).hexdigest()
    )
    sources = read_settings(sources=dict(allow_private_urls=True)).sources

    def submit() -> list[UUID]:
        submission = enqueue(
            SubmissionRequest([str(doc)], webhook_url=webhook_receiver.url),
            publisher=RecordingPublisher(),
            store=store,
            source_settings=sources,
        )
        assert all(item.deduplicated for item in submission.accepted)
        return submission.job_ids

    assert submit() == [ended.id]
    assert submit() == [ended.id]  # the same receiver again: still one event for the job
    assert len(make_dispatcher().deliver_due().delivered) == 1
    [received] = webhook_receiver.accepted
    assert received.event is not None and received.event["data"]["job_id"] == str(ended.id)


def test_what_a_killed_sender_held_is_sent_by_the_next_pass_once_its_claim_lapses(
    store: JobStore, webhook_receiver: WebhookReceiver, make_dispatcher: Dispatchers
) -> None:
    job_in_state(store, JobState.SUCCEEDED, webhook_url=webhook_receiver.url)
    dead_sender = WebhookOutbox(store.pool).claim(claim_s=0.5)  # claimed, then never reported
    assert dead_sender is not None
    dispatcher = make_dispatcher()
    assert dispatcher.deliver_due().delivered == []  # held: not sent twice at once
    wait_for(lambda: dispatcher.deliver_due().delivered, message="the lapsed claim sent")
    [received] = webhook_receiver.accepted
    assert received.event_id == str(dead_sender.id)
    assert not WebhookOutbox(store.pool).delivered(dead_sender, status=200)  # fenced off
