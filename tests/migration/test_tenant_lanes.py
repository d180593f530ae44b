"""Migration 0019: tenants own jobs, and each lane's count of queued jobs follows the rows.

The fair claim reads a lane's count to know which tenants have work without reading every
queued job; a count that drifted from the rows would starve a tenant or send claimers to empty
lanes. So every way a job enters or leaves ``queued`` is driven here against the real triggers,
and the counts are compared with the rows after each step.
"""

from __future__ import annotations

import random
from uuid import UUID

import psycopg
import pytest

Lanes = dict[tuple[str, int, str], int]


def lanes(conn: psycopg.Connection) -> Lanes:
    rows = conn.execute("SELECT queue, priority, tenant, queued FROM tenant_lanes WHERE queued > 0")
    return {(q, p, t): n for q, p, t, n in rows}


def counted_from_rows(conn: psycopg.Connection) -> Lanes:
    rows = conn.execute(
        "SELECT queue, priority, tenant, count(*) FROM jobs WHERE state = 'queued'"
        " GROUP BY queue, priority, tenant"
    )
    return {(q, p, t): n for q, p, t, n in rows}


def add_jobs(
    conn: psycopg.Connection,
    count: int,
    *,
    tenant: str = "default",
    queue: str = "doclane.small",
    priority: int = 0,
) -> list[UUID]:
    rows = conn.execute(
        "INSERT INTO jobs (source_kind, source_uri, profile, formats, queue, priority, tenant)"
        " SELECT 'file', '/inbox/' || g || '.md', 'docling-mcp', '{md}', %s, %s, %s"
        " FROM generate_series(1, %s) g RETURNING id",
        [queue, priority, tenant, count],
    )
    return [r[0] for r in rows]


def claim(conn: psycopg.Connection, ids: list[UUID]) -> None:
    conn.execute("SELECT count(*) FROM claim_jobs(%s, 'w', 60, 'validating')", [ids])


@pytest.fixture
def conn(raw_sql: psycopg.Connection) -> psycopg.Connection:
    raw_sql.execute("INSERT INTO tenants (name) VALUES ('acme'), ('globex')")
    return raw_sql


def test_default_exists_and_an_unknown_tenant_owns_nothing(conn: psycopg.Connection) -> None:
    assert add_jobs(conn, 1)  # the default tenant's, as every job before tenants
    with pytest.raises(psycopg.errors.ForeignKeyViolation):
        add_jobs(conn, 1, tenant="nobody")
    with pytest.raises(psycopg.errors.CheckViolation):
        conn.execute("INSERT INTO tenants (name) VALUES ('Not A Name')")


def test_a_submission_counts_once_per_lane(conn: psycopg.Connection) -> None:
    add_jobs(conn, 5, tenant="acme")
    add_jobs(conn, 3, tenant="acme", priority=5)
    add_jobs(conn, 2, tenant="globex", queue="doclane.large")
    assert lanes(conn) == {
        ("doclane.small", 0, "acme"): 5,
        ("doclane.small", 5, "acme"): 3,
        ("doclane.large", 0, "globex"): 2,
    }


def test_every_way_in_and_out_of_queued_is_counted(conn: psycopg.Connection) -> None:
    ids = add_jobs(conn, 6, tenant="acme")
    claim(conn, ids[:3])  # queued -> running
    assert lanes(conn) == {("doclane.small", 0, "acme"): 3} == counted_from_rows(conn)
    conn.execute("UPDATE jobs SET state = 'cancelled' WHERE id = %s", [ids[3]])
    conn.execute("UPDATE jobs SET state = 'queued' WHERE id = %s", [ids[0]])  # lease expired
    conn.execute(
        "UPDATE jobs SET state = 'retrying', next_attempt_at = now() WHERE id = %s", [ids[1]]
    )
    conn.execute("UPDATE jobs SET state = 'queued' WHERE id = %s", [ids[1]])  # retry sent back
    conn.execute("UPDATE jobs SET priority = 7 WHERE id = %s", [ids[4]])  # moves lanes
    conn.execute("UPDATE jobs SET state = 'succeeded' WHERE id = %s", [ids[2]])
    assert (
        lanes(conn)
        == counted_from_rows(conn)
        == {
            ("doclane.small", 0, "acme"): 3,
            ("doclane.small", 7, "acme"): 1,
        }
    )


def test_counts_follow_the_rows_through_any_sequence(conn: psycopg.Connection) -> None:
    rng = random.Random(19)
    tenants, queues = ["default", "acme", "globex"], ["doclane.small", "doclane.medium"]
    for _ in range(60):
        step = rng.randrange(5)
        if step == 0:
            add_jobs(conn, rng.randint(1, 4), tenant=rng.choice(tenants), queue=rng.choice(queues))
            continue
        queued = [r[0] for r in conn.execute("SELECT id FROM jobs WHERE state = 'queued'")]
        running = [r[0] for r in conn.execute("SELECT id FROM jobs WHERE state = 'running'")]
        if step == 1 and queued:
            claim(conn, rng.sample(queued, min(len(queued), rng.randint(1, 3))))
        elif step == 2 and running:
            conn.execute("UPDATE jobs SET state = 'queued' WHERE id = ANY(%s)", [running])
        elif step == 3 and queued:
            conn.execute("UPDATE jobs SET state = 'cancelled' WHERE id = %s", [rng.choice(queued)])
        elif step == 4 and queued:
            conn.execute(
                "UPDATE jobs SET priority = priority + 1 WHERE id = %s", [rng.choice(queued)]
            )
        assert lanes(conn) == counted_from_rows(conn)


def test_a_lane_that_gets_work_again_starts_with_no_credit(conn: psycopg.Connection) -> None:
    acme = add_jobs(conn, 1, tenant="acme")
    add_jobs(conn, 1, tenant="globex")
    conn.execute("UPDATE tenant_lanes SET pass = 40 WHERE tenant = 'globex'")
    claim(conn, acme)  # acme's lane empties at pass 0 while globex's goes on at 40
    add_jobs(conn, 1, tenant="acme")
    add_jobs(conn, 1, tenant="default")  # a new lane
    passes: dict[str, float] = dict(
        conn.execute("SELECT tenant, pass FROM tenant_lanes").fetchall()
    )
    assert passes == {"acme": 40, "globex": 40, "default": 40}
    conn.execute("UPDATE tenant_lanes SET pass = 90 WHERE tenant = 'acme'")
    claim(conn, [r[0] for r in conn.execute("SELECT id FROM jobs WHERE state = 'queued'")])
    add_jobs(conn, 1, tenant="acme")  # no lane with work: it keeps its own pass
    assert conn.execute("SELECT pass FROM tenant_lanes WHERE tenant = 'acme'").fetchone() == (90,)


def test_a_running_job_s_progress_and_end_never_touch_the_lanes(conn: psycopg.Connection) -> None:
    """The triggers' WHEN clauses keep the hot path (lease, stage, calls, the end) free of the
    lane rows: the lanes' writer is not even called."""
    conn.execute("SET track_functions = 'pl'")
    job = add_jobs(conn, 1, tenant="acme")
    claim(conn, job)

    def calls() -> int:
        conn.execute("SELECT pg_stat_clear_snapshot()")
        row = conn.execute(
            "SELECT coalesce(sum(calls), 0) FROM pg_stat_user_functions"
            " WHERE funcname = 'tenant_lane_add'"
        ).fetchone()
        assert row is not None
        return int(row[0])

    conn.execute("SELECT pg_stat_force_next_flush()")
    before = calls()
    assert before >= 1  # the claim itself was counted
    conn.execute(
        "UPDATE jobs SET lease_expires_at = now() + interval '1 minute', stage = 'converting'"
        " WHERE id = %s",
        job,
    )
    conn.execute("UPDATE jobs SET state = 'succeeded' WHERE id = %s", job)
    conn.execute("SELECT pg_stat_force_next_flush()")
    assert calls() == before


def test_a_slice_is_its_parent_s_tenant_s(conn: psycopg.Connection) -> None:
    (parent,) = add_jobs(conn, 1, tenant="globex")
    conn.execute("SELECT * FROM split_job(%s, ARRAY['1-2', '3-4'])", [parent])
    owners = conn.execute("SELECT tenant FROM jobs WHERE parent_id = %s", [parent]).fetchall()
    assert owners == [("globex",), ("globex",)]
    assert lanes(conn) == {("doclane.small", 0, "globex"): 2} == counted_from_rows(conn)


def test_recount_repairs_counts_written_around_the_triggers(conn: psycopg.Connection) -> None:
    add_jobs(conn, 4, tenant="acme")
    conn.execute("UPDATE tenant_lanes SET queued = 99")
    conn.execute(
        "INSERT INTO tenant_lanes (queue, priority, tenant, queued) VALUES"
        " ('doclane.large', 0, 'globex', 3)"
    )
    assert conn.execute("SELECT recount_tenant_lanes()").fetchone() == (2,)
    assert lanes(conn) == counted_from_rows(conn) == {("doclane.small", 0, "acme"): 4}
    assert conn.execute("SELECT recount_tenant_lanes()").fetchone() == (0,)
