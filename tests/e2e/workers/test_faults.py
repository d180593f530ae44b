"""What fleets meet: killed workers, servers that go away or forget, a broker that loses its
messages, duplicate deliveries, evicted keys. Every job must end succeeded, exactly once.
"""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Callable
from pathlib import Path
from uuid import UUID

from pipeline.jobs.model import EventKind, Job, JobState, Stage
from pipeline.queues import QUEUE_SMALL, Wakeup
from pipeline.settings.tree import read_settings
from tests.fixtures.brokers import Broker
from tests.fixtures.fake_server import FakeServer
from tests.fixtures.processes import process_gone
from tests.fixtures.samples import write_mixed, write_sample
from tests.fixtures.waiting import wait_for
from tests.fixtures.workers import Cluster
from tests.support.worker_results import (
    CONVERT,
    assert_one_result_set,
    pool_process_of,
)

EXPORT = "export_docling_document_to_markdown"


def running_in_stage(cluster: Cluster, job_id: UUID, stage: Stage) -> Job | None:
    job = cluster.store.reads.get_job(job_id)
    return job if job and job.state is JobState.RUNNING and job.stage is stage else None


def succeeded_count(cluster: Cluster, job_ids: list[UUID]) -> int:
    return sum(1 for j in cluster.jobs(job_ids) if j.state is JobState.SUCCEEDED)


def test_a_pool_process_killed_mid_conversion_its_job_completes_elsewhere_once(
    make_cluster: Callable[..., Cluster],
    any_broker: Broker,
    fake_server: FakeServer,
    tmp_path: Path,
) -> None:
    cluster = make_cluster(any_broker, fake_server.url)
    worker = cluster.start_worker(concurrency=2)
    fake_server.configure(delay_s=3, delay_tools=[CONVERT])
    job_id = cluster.submit([write_sample(tmp_path, "docx", 1)]).job_ids[0]
    job = wait_for(
        lambda: running_in_stage(cluster, job_id, Stage.CONVERTING), message="mid-conversion"
    )
    victim = pool_process_of(job, worker)

    os.kill(victim, signal.SIGKILL)
    fake_server.configure(delay_s=0)
    [done] = cluster.wait_terminal([job_id], timeout=60)

    assert_one_result_set(cluster, [done])
    assert done.attempt == 2 and done.lease_owner is None
    reasons = [
        (e.detail or {}).get("reason")
        for e in cluster.store.reads.events(job_id)
        if e.kind is EventKind.STATE_CHANGE and e.to_state is JobState.QUEUED and e.attempt == 1
    ]
    assert reasons == ["lease expired"]
    assert worker.popen.poll() is None, "the worker replaced its lost pool process"


def test_a_whole_worker_killed_mid_conversion_its_job_completes_elsewhere_once(
    make_cluster: Callable[..., Cluster],
    any_broker: Broker,
    fake_server: FakeServer,
    tmp_path: Path,
) -> None:
    """Killed whole (SIGKILL to its process group), a worker runs no shutdown code. On Redis
    the message it held is gone with it (no acknowledgement emulation: nothing waits in an
    "unacked" hash); on RabbitMQ the broker hands it to the next consumer, whose claim finds the
    job running. Either way the database brings the job back: its lease expires, the reconciler
    requeues and republishes it, and it is converted and stored once."""
    cluster = make_cluster(any_broker, fake_server.url)
    first = cluster.start_worker(concurrency=1)
    fake_server.configure(delay_s=3, delay_tools=[CONVERT])
    job_id = cluster.submit([write_sample(tmp_path, "docx", 4)]).job_ids[0]
    wait_for(lambda: running_in_stage(cluster, job_id, Stage.CONVERTING), message="converting")

    os.killpg(first.pid, signal.SIGKILL)
    first.wait(30)
    if any_broker.redis_db is not None:
        assert any_broker.keys("unacked*") == [], "kombu's acknowledgement emulation is on"
    fake_server.configure(delay_s=0)
    cluster.start_worker(concurrency=1)
    [done] = cluster.wait_terminal([job_id], timeout=60)

    assert_one_result_set(cluster, [done])
    assert done.attempt == 2
    reasons = [
        (e.detail or {}).get("reason")
        for e in cluster.store.reads.events(job_id)
        if e.kind is EventKind.STATE_CHANGE and e.to_state is JobState.QUEUED and e.attempt == 1
    ]
    assert reasons == ["lease expired"]


def test_sigterm_lets_the_running_job_finish_and_the_worker_exit(
    make_cluster: Callable[..., Cluster],
    any_broker: Broker,
    fake_server: FakeServer,
    tmp_path: Path,
) -> None:
    cluster = make_cluster(any_broker, fake_server.url)
    worker = cluster.start_worker(concurrency=1)
    fake_server.configure(delay_s=2, delay_tools=[CONVERT])
    job_id = cluster.submit([write_sample(tmp_path, "md", 2)]).job_ids[0]
    wait_for(lambda: running_in_stage(cluster, job_id, Stage.CONVERTING), message="running")

    worker.terminate()
    code = worker.wait(timeout=60)

    assert code == 0, worker.tail()
    job = cluster.store.reads.get_job(job_id)
    assert job is not None
    assert_one_result_set(cluster, [job])
    assert job.attempt == 1
    assert "Warm shutdown" in worker.log()
    assert fake_server.stats()["deletes"] >= 1, "the pool process closed its MCP session"


def test_a_server_down_longer_than_the_breaker_reset_fails_no_job(
    make_cluster: Callable[..., Cluster],
    any_broker: Broker,
    fake_server: FakeServer,
    tmp_path: Path,
) -> None:
    # A job at a time (rounds off): a round of eight would finish most jobs before the stop.
    cluster = make_cluster(any_broker, fake_server.url, DOCLANE_ROUND_MAX_DOCS="1")
    worker = cluster.start_worker(concurrency=2)
    fake_server.configure(delay_s=0.2, delay_tools=[CONVERT])
    # Each reset the server is still down costs the job that carries the half-open trial an
    # attempt (the trial reached for the server); a server slow to come back on a loaded
    # machine must not fail a job through that.
    submit = read_settings(submit=dict(max_attempts=6)).submit
    paths = [str(p) for p in write_mixed(tmp_path / "docs", 12)]
    ids = cluster.submit(paths, submit_settings=submit).job_ids
    wait_for(lambda: succeeded_count(cluster, ids) >= 2, message="some jobs done")

    fake_server.stop()

    # The breaker's reset passed with the server still down: its half-open trial was sent (and
    # failed), so the circuit stayed open past its reset at least once.
    wait_for(
        lambda: "sending the half-open trial call" in worker.log(),
        timeout=60,
        message="a half-open trial while the server is down",
    )
    fake_server.start()
    jobs = cluster.wait_terminal(ids, timeout=120)

    assert_one_result_set(cluster, jobs)
    for job in jobs:  # an open circuit's wait is free unless a try of that attempt reached
        retries = [  # the server (E302, then every circuit open): then it was charged
            (e.error_code, (e.detail or {}).get("reason", ""))
            for e in cluster.store.reads.events(job.id)
            if e.kind is EventKind.STATE_CHANGE and e.to_state is JobState.RETRYING
        ]
        refunded = [code for code, reason in retries if "without charging" in reason]
        assert set(refunded) <= {"E309"}, (job.id, retries)
        assert job.attempts_spent == 1 + len(retries) - len(refunded), (job.id, retries)


def test_while_every_circuit_is_open_waiting_jobs_are_not_claimed(
    make_cluster: Callable[..., Cluster],
    any_broker: Broker,
    fake_server: FakeServer,
    tmp_path: Path,
) -> None:
    """A process that met every circuit open claims nothing until the reset: its drain ends
    and rings its queue for after it. Claiming the waiting jobs only to fail them at once
    (E309) cost a claim, a retry and their events, per job and per reset.

    The reset is long, so the circuit stays open for the whole test: each process claims the
    jobs it needs to find the circuit open (its first; a fourth try always meets the circuit
    that three failures opened), and no other job is ever claimed."""
    cluster = make_cluster(
        any_broker,
        fake_server.url,
        DOCLANE_ROUND_MAX_DOCS="1",
        DOCLANE_BREAKER_RESET_S="3600",
        DOCLANE_RETRY_MAX_TRIES="4",
    )
    fake_server.stop()
    concurrency = 2
    cluster.start_worker(concurrency=concurrency)
    ids = cluster.submit([str(write_sample(tmp_path / "docs", "md", n)) for n in range(20)]).job_ids
    publisher = cluster.publisher()

    def accounted() -> list[Job] | None:
        """Every bell taken and every drain ended: nothing running, some job tried."""
        jobs = cluster.jobs(ids)
        settled = all(j.state is not JobState.RUNNING for j in jobs) and any(
            j.attempt for j in jobs
        )
        return jobs if settled and publisher.waiting(QUEUE_SMALL) == 0 else None

    jobs = wait_for(accounted, timeout=60, message="every bell taken")

    claimed = [j for j in jobs if j.attempt]
    assert 1 <= len(claimed) <= concurrency, [(j.attempt, j.state.value) for j in claimed]
    assert all(j.attempt == 1 and j.state is JobState.RETRYING for j in claimed)
    for job in jobs:
        if job.attempt == 0:
            assert job.state is JobState.QUEUED and job.attempts_spent == 0
            events = cluster.store.reads.events(job.id)
            assert not [e for e in events if e.kind is not EventKind.STATE_CHANGE], events
            assert len(events) == 1, "the submission's event only"


def test_a_server_that_forgets_sessions_and_restarts_fails_no_job(
    make_cluster: Callable[..., Cluster],
    any_broker: Broker,
    fake_server: FakeServer,
    tmp_path: Path,
) -> None:
    cluster = make_cluster(any_broker, fake_server.url)
    cluster.start_worker(concurrency=2)
    fake_server.configure(delay_s=0.1, delay_tools=[CONVERT, EXPORT])
    ids = cluster.submit([str(p) for p in write_mixed(tmp_path / "docs", 30)]).job_ids

    wait_for(lambda: succeeded_count(cluster, ids) >= 5, message="a few done")
    forgotten = fake_server.forget_sessions()
    wait_for(lambda: succeeded_count(cluster, ids) >= 15, message="half done")
    fake_server.restart()
    fake_server.configure(delay_s=0.1, delay_tools=[CONVERT, EXPORT])
    jobs = cluster.wait_terminal(ids, timeout=120)

    assert forgotten >= 1
    assert_one_result_set(cluster, jobs)
    assert fake_server.stats()["initialize_calls"] >= 1, "sessions were opened again"


def test_a_flushed_broker_loses_messages_and_the_reconciler_finishes_every_job(
    make_cluster: Callable[..., Cluster],
    any_broker: Broker,
    fake_server: FakeServer,
    tmp_path: Path,
) -> None:
    # A job at a time (rounds off), and the broker flushed while no worker runs: a drain would
    # carry the rest of the queue by ringing again, and the loss under test is the one only
    # the reconciler can mend.
    cluster = make_cluster(any_broker, fake_server.url, DOCLANE_ROUND_MAX_DOCS="1")
    worker = cluster.start_worker(concurrency=2)
    fake_server.configure(delay_s=0.15, delay_tools=[CONVERT])
    ids = cluster.submit([str(p) for p in write_mixed(tmp_path / "docs", 40)]).job_ids
    wait_for(lambda: succeeded_count(cluster, ids) >= 5, message="a few done")

    worker.stop()  # warm shutdown: its jobs end, what it held goes back to the broker
    any_broker.flush()
    waiting_after_flush = len(ids) - succeeded_count(cluster, ids)
    after = cluster.start_worker(concurrency=2)
    jobs = cluster.wait_terminal(ids, timeout=120)

    assert waiting_after_flush >= 1, "the flush came mid-run"
    assert_one_result_set(cluster, jobs)
    assert "bells rung on doclane.small" in after.log(), "the reconciler rang the flushed queue"


def test_a_duplicate_delivery_of_a_finished_job_writes_nothing(
    make_cluster: Callable[..., Cluster],
    any_broker: Broker,
    fake_server: FakeServer,
    tmp_path: Path,
) -> None:
    cluster = make_cluster(any_broker, fake_server.url, DOCLANE_LOG_FORMAT="json")
    worker = cluster.start_worker(concurrency=1)
    job_id = cluster.submit([write_sample(tmp_path, "csv", 3)]).job_ids[0]
    [done] = cluster.wait_terminal([job_id])
    events_before = cluster.store.reads.events(job_id)
    calls_before = fake_server.stats()["requests_by_tool"]

    cluster.publisher().publish(Wakeup(done.queue))

    def skipped() -> list[dict[str, object]]:
        lines = [json.loads(x) for x in worker.log().splitlines() if x.startswith("{")]
        return [x for x in lines if "nothing to claim in doclane.small" in x["message"]]

    wait_for(skipped, message="the doubled bell delivered and its claim empty")
    claimed = [
        json.loads(x) for x in worker.log().splitlines() if x.startswith("{") and "claimed" in x
    ]
    assert claimed and claimed[0]["job_id"] == str(job_id) and claimed[0]["attempt"] == 1
    succeeded = [
        json.loads(x)
        for x in worker.log().splitlines()
        if x.startswith("{") and "succeeded in" in x and "doclane.processor" in x
    ]
    assert succeeded and succeeded[0]["job_id"] == str(job_id)
    assert succeeded[0]["origin"] == fake_server.origin

    after = cluster.store.reads.get_job(job_id)
    assert after is not None and (after.state, after.attempt) == (JobState.SUCCEEDED, 1)
    assert len(cluster.store.reads.list_results(job_id)) == 1
    assert cluster.store.reads.events(job_id) == events_before
    assert fake_server.stats()["requests_by_tool"] == calls_before


def test_a_key_evicted_between_convert_and_export_is_converted_again(
    make_cluster: Callable[..., Cluster],
    any_broker: Broker,
    fake_server: FakeServer,
    tmp_path: Path,
) -> None:
    """The server empties its cache just before the first export, as ten other conversions
    between this job's convert and export would: the key is gone, the worker converts again."""
    cluster = make_cluster(any_broker, fake_server.url)
    cluster.start_worker(concurrency=1)
    fake_server.configure(evict_next=1, evict_tools=[EXPORT])

    job_id = cluster.submit([write_sample(tmp_path, "html", 10)]).job_ids[0]
    [done] = cluster.wait_terminal([job_id])

    assert_one_result_set(cluster, [done])
    assert done.attempt == 1, "no attempt was spent on the eviction"
    calls = [
        (e.tool, e.outcome)
        for e in cluster.store.reads.events(job_id)
        if e.kind is EventKind.MCP_CALL
    ]
    assert calls == [
        (CONVERT, "ok"),
        (EXPORT, "error"),
        ("check_document_in_local_cache", "ok"),
        (CONVERT, "ok"),
        (EXPORT, "ok"),
    ]
    assert fake_server.stats()["cache_evictions"] >= 1
    assert "# Page 10" in (cluster.store.reads.get_result(job_id, "md") or "")


def test_a_job_cancelled_while_running_stops_cooperatively_and_disturbs_no_other_job(
    make_cluster: Callable[..., Cluster],
    any_broker: Broker,
    fake_server: FakeServer,
    tmp_path: Path,
) -> None:
    """Cancel is a change of the row, never a signal to a process.

    One pool process converts job A (far longer than the test waits). ``doclane cancel A``: the
    attempt notices at its next lease renewal, withdraws its MCP call (the server receives
    ``notifications/cancelled``) and writes nothing. The same process, never signalled, then
    runs job B to success on B's first attempt: nothing charged, nothing killed.
    """
    cluster = make_cluster(any_broker, fake_server.url)
    worker = cluster.start_worker(concurrency=1)
    fake_server.configure(delay_s=600, delay_tools=[CONVERT])
    job_id = cluster.submit([write_sample(tmp_path, "docx", 20)]).job_ids[0]
    job = wait_for(lambda: running_in_stage(cluster, job_id, Stage.CONVERTING), message="running")
    converting = pool_process_of(job, worker)
    events_before_cancel = len(cluster.store.reads.events(job_id))

    out = cluster.cli_json("cancel", str(job_id))
    [withdrawn] = wait_for(
        lambda: fake_server.stats()["cancelled"],
        timeout=60,
        message="the cancelled attempt to withdraw its MCP call",
    )
    assert "withdrawn" in withdrawn["reason"]
    fake_server.configure(delay_s=0)
    after_id = cluster.submit([write_sample(tmp_path, "md", 21)]).job_ids[0]
    [after] = cluster.wait_terminal([after_id])

    assert (out["previous_state"], out["state"], out["stopping"]) == ("running", "cancelled", True)
    assert not process_gone(converting), "the pool process was never signalled"
    assert_one_result_set(cluster, [after])
    assert (after.attempt, after.attempts_spent) == (1, 1), "the next job was not disturbed"
    ran_after = [
        e.detail["worker"]
        for e in cluster.store.reads.events(after_id)
        if e.to_state is JobState.RUNNING and e.detail
    ]
    assert [int(w.rsplit(":", 1)[1]) for w in ran_after] == [converting], "the same process"
    job = cluster.store.reads.get_job(job_id)
    assert job is not None and job.state is JobState.CANCELLED
    assert cluster.store.reads.list_results(job_id) == []
    # The only event after the cancel is the cancel itself: the attempt wrote nothing.
    later = cluster.store.reads.events(job_id)[events_before_cancel:]
    assert [(e.kind, e.to_state) for e in later] == [(EventKind.STATE_CHANGE, JobState.CANCELLED)]


def test_a_url_source_is_fetched_by_the_worker(
    make_cluster: Callable[..., Cluster],
    redis_broker: Broker,
    fake_server: FakeServer,
    http_source: object,
) -> None:
    body = b"# From the web\n\n| k | v |\n|---|---|\n| a | 1 |\n"
    http_source.serve("/page.md", body, content_type="text/markdown")  # type: ignore[attr-defined]
    cluster = make_cluster(redis_broker, fake_server.url)
    cluster.start_worker(concurrency=1)

    url = http_source.url("/page.md")  # type: ignore[attr-defined]
    job_id = cluster.submit([url]).job_ids[0]
    [done] = cluster.wait_terminal([job_id])

    assert_one_result_set(cluster, [done])
    assert done.size_bytes == len(body) and done.queue == "doclane.large"
    assert "# From the web" in (cluster.store.reads.get_result(job_id, "md") or "")


def test_the_per_format_profile_through_workers(
    make_cluster: Callable[..., Cluster],
    redis_broker: Broker,
    fake_server_factory: Callable[..., FakeServer],
    tmp_path: Path,
) -> None:
    server = fake_server_factory(profile="per-format")
    cluster = make_cluster(redis_broker, server.url)
    cluster.start_worker(concurrency=2)
    paths = [write_sample(tmp_path, kind, n) for n, kind in enumerate(("docx", "xlsx", "pptx"))]

    ids = cluster.submit([str(p) for p in paths], formats=("md", "html", "json")).job_ids
    jobs = cluster.wait_terminal(ids)

    assert_one_result_set(cluster, jobs)
    for job, path in zip(jobs, paths, strict=True):
        assert path.stem in (cluster.store.reads.get_result(job.id, "md") or "")
        tools = [e.tool for e in cluster.store.reads.events(job.id) if e.kind is EventKind.MCP_CALL]
        assert tools[0] == f"convert_{path.suffix[1:]}"
