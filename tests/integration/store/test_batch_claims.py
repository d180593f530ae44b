"""A batch's companions taken by the one claim (migration 0026): its tenant's, in fair order,
by the batch's rules, the lanes' passes advanced by every member."""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Iterator
from uuid import UUID

import psycopg
import pytest

from pipeline.jobs.model import Job, JobState
from pipeline.store.attempts import BatchLimits
from pipeline.store.store import JobStore
from tests.support.store_builders import tenant

QUEUE = "doclane.small"
SMALL_BELOW = 10**6
LIMITS = BatchLimits(max_bytes=10**6, table_suffixes=frozenset({".csv"}), table_max_bytes=5000)
_order = itertools.count()


@pytest.fixture
def raw(raw_sql: psycopg.Connection) -> Iterator[psycopg.Connection]:
    yield raw_sql


def queued(
    raw: psycopg.Connection,
    owner: str,
    name: str,
    *,
    size: int = 1000,
    content: str | None = None,
    priority: int = 0,
) -> UUID:
    """A never-tried queued file job of ``owner``, younger than every one made before it."""
    sha = hashlib.sha256((content or name).encode()).hexdigest()
    row = raw.execute(
        "INSERT INTO jobs (source_kind, source_uri, size_bytes, content_sha256, profile,"
        " options, formats, queue, priority, tenant, created_at)"
        " VALUES ('file', %s, %s, %s, 'auto', '{}', '{md}', %s, %s, %s,"
        " now() - interval '1 hour' + %s * interval '1 ms') RETURNING id",
        (f"/inbox/{owner}/{name}", size, sha, QUEUE, priority, owner, next(_order)),
    ).fetchone()
    assert row is not None
    return UUID(str(row[0]))


def lead_of(store: JobStore) -> Job:
    claim = store.attempts.claim_queue(QUEUE, "w", lease_s=60)
    assert claim.lead is not None
    return claim.lead


def companions(
    store: JobStore, lead: Job, *, limit: int = 8, limits: BatchLimits = LIMITS
) -> list[Job]:
    return store.attempts.claim_companions(
        lead, "w", 60, limit=limit, small_below=SMALL_BELOW, batch=limits
    )


def passes(raw: psycopg.Connection, owner: str) -> dict[int, float]:
    rows = raw.execute(
        "SELECT priority, pass FROM tenant_lanes WHERE queue = %s AND tenant = %s",
        (QUEUE, owner),
    ).fetchall()
    return {priority: pass_ for priority, pass_ in rows}


def test_only_the_leads_tenant_by_priority_then_age_claimed_and_charged(
    store: JobStore, raw: psycopg.Connection
) -> None:
    tenant(raw, "a", weight=2)
    tenant(raw, "b")
    lead_id = queued(raw, "a", "lead.docx")
    others = [queued(raw, "b", f"b{n}.docx") for n in range(3)]
    mine = [queued(raw, "a", f"a{n}.docx") for n in range(3)]
    urgent = queued(raw, "a", "urgent.docx", priority=5)
    raw.execute("UPDATE tenant_lanes SET pass = 0")
    raw.execute("UPDATE jobs SET priority = 9 WHERE id = %s", (lead_id,))
    lead = lead_of(store)
    assert lead.id == lead_id
    before = passes(raw, "a")

    taken = companions(store, lead)

    assert [j.id for j in taken] == [urgent, *mine], "the tenant's, higher priority first"
    assert all(j.state is JobState.RUNNING and j.attempt == 1 for j in taken)
    assert all(j.lease_owner == "w" and j.stage is None for j in taken)
    after = passes(raw, "a")
    assert after[5] == pytest.approx(before[5] + 1 / 2), "a job at weight 2: half a pass"
    assert after[0] == pytest.approx(before[0] + 3 / 2)
    for job_id in others:
        other = store.reads.get_job(job_id)
        assert other is not None and other.state is JobState.QUEUED


def test_never_a_name_or_a_content_twice_and_a_later_fitting_job_joins(
    store: JobStore, raw: psycopg.Connection
) -> None:
    tenant(raw, "a")
    queued(raw, "a", "report.docx", content="lead")
    lead = lead_of(store)
    same_name = queued(raw, "a", "report.docx", content="another report")
    same_content = queued(raw, "a", "copy.docx", content="lead")
    first = queued(raw, "a", "one.docx", content="one")
    twin = queued(raw, "a", "two.docx", content="one")
    later = queued(raw, "a", "three.docx", content="three")
    four = queued(raw, "a", "four.docx", content="four")
    four_again = queued(raw, "a", "four.docx", content="four again")

    taken = companions(store, lead)

    assert [j.id for j in taken] == [first, later, four]
    for job_id in (same_name, same_content, twin, four_again):
        left = store.reads.get_job(job_id)
        assert left is not None and left.state is JobState.QUEUED, "left for a claim of its own"


def test_the_batch_ends_where_its_bytes_would_pass_the_budget(
    store: JobStore, raw: psycopg.Connection
) -> None:
    tenant(raw, "a")
    queued(raw, "a", "lead.docx", size=400)
    lead = lead_of(store)
    fits = queued(raw, "a", "fits.docx", size=500)
    over = queued(raw, "a", "over.docx", size=200)
    limits = BatchLimits(max_bytes=1000, table_suffixes=frozenset(), table_max_bytes=0)

    taken = companions(store, lead, limits=limits)

    assert [j.id for j in taken] == [fits], "400 + 500 fit 1000; 200 more would not"
    left = store.reads.get_job(over)
    assert left is not None and left.state is JobState.QUEUED


def test_a_table_over_its_cap_is_left_to_go_alone(store: JobStore, raw: psycopg.Connection) -> None:
    tenant(raw, "a")
    queued(raw, "a", "lead.docx")
    lead = lead_of(store)
    big_table = queued(raw, "a", "big.CSV", size=6000)
    small_table = queued(raw, "a", "small.csv", size=4000)
    document = queued(raw, "a", "big.docx", size=6000)

    taken = companions(store, lead)

    assert [j.id for j in taken] == [small_table, document]
    alone = lead_of(store)
    assert alone.id == big_table, "the next claim takes it, alone"


def test_no_more_than_the_tenants_running_cap_leaves_room_for(
    store: JobStore, raw: psycopg.Connection
) -> None:
    tenant(raw, "a", cap=3)
    for n in range(10):
        queued(raw, "a", f"a{n}.docx")
    lead = lead_of(store)

    taken = companions(store, lead)

    assert len(taken) == 2, "the lead runs: room for two more"
    assert companions(store, lead) == [], "and none once the cap is reached"
