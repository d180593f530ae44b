"""Short ids against a real database: a unique prefix names its job (or submission), among a
tenant's when asked; more than one is E121 saying how many, none E108; and the query is an
index range, never a scan of every id as text."""

from __future__ import annotations

from uuid import UUID

import psycopg
import pytest

from errors import AmbiguousId, JobNotFound
from pipeline.store.queries import query
from pipeline.store.store import JobStore
from tests.support.store_builders import job_with_id

A = "6f1d2c1e-1111-4000-8000-000000000001"
B = "6f1d2c1f-2222-4000-8000-000000000002"  # shares "6f1d2c1" with A
C = "6f1d2c10-3333-4000-8000-000000000003"  # another tenant's, also "6f1d2c1"
S1 = "1234abcd-0000-4000-8000-0000000000a1"
S2 = "1234abce-0000-4000-8000-0000000000a2"


@pytest.fixture
def ids(store: JobStore, raw_sql: psycopg.Connection) -> None:
    store.tenants.set("other")
    job_with_id(raw_sql, A, submission_id=S1)
    job_with_id(raw_sql, B, submission_id=S1)  # one submission of two jobs
    job_with_id(raw_sql, C, tenant="other", submission_id=S2)


@pytest.mark.usefixtures("ids")
def test_a_unique_prefix_names_its_job_and_others_say_why_not(store: JobStore) -> None:
    reads = store.reads
    assert reads.job_id("6f1d2c1e") == UUID(A)  # the 8 characters the console shows
    assert reads.job_id("6F1D2C1E-11") == UUID(A)  # any case, dashes where the id has them
    assert reads.job_id("6f1d2c10") == UUID(C)
    with pytest.raises(AmbiguousId) as many:
        reads.job_id("6f1d2c1")
    assert many.value.code == "E121" and many.value.detail["matches"] == 3
    assert "3 jobs have an id that starts with '6f1d2c1'" in many.value.message
    with pytest.raises(AmbiguousId) as two:  # a tenant's own jobs only: the other's not counted
        reads.job_id("6f1d2c1", tenant="default")
    assert two.value.detail["matches"] == 2
    with pytest.raises(JobNotFound) as hidden:
        reads.job_id("6f1d2c10", tenant="default")
    assert hidden.value.code == "E108"
    with pytest.raises(JobNotFound, match="no job id starts with 'abcdef'"):
        reads.job_id("abcdef")
    for bad in ("6f1d", "6f1d2c1g", "", "not-an-id"):
        with pytest.raises(ValueError, match="at least its first 6 characters"):
            reads.job_id(bad)
    whole = "0d6a0a56-3a3c-4a43-9c5e-1b7c2a0d0e11"  # a whole id is taken as it is
    assert reads.job_id(whole) == UUID(whole)


@pytest.mark.usefixtures("ids")
def test_a_unique_prefix_names_its_submission_however_many_jobs_it_has(store: JobStore) -> None:
    reads = store.reads
    assert reads.submission_id("1234abcd") == UUID(S1)  # two jobs, one submission
    with pytest.raises(AmbiguousId) as many:
        reads.submission_id("1234abc")
    assert many.value.detail["matches"] == 2 and "2 submissions" in many.value.message
    assert reads.submission_id("1234abc", tenant="default") == UUID(S1)
    with pytest.raises(JobNotFound, match="no submission id starts with"):
        reads.submission_id("1234abce", tenant="default")


def test_the_prefix_queries_are_index_ranges(raw_sql: psycopg.Connection) -> None:
    """With sequential scans priced out, a form no index serves (id::text LIKE '6f1d%')
    would still show one; these read the primary key and the submissions' index."""
    raw_sql.execute("SET enable_seqscan = off")
    params = {
        "low": UUID("6f1d2c00-0000-0000-0000-000000000000"),
        "high": UUID("6f1d2cff-ffff-ffff-ffff-ffffffffffff"),
        "tenant": None,
    }
    for name, index in (
        ("job_ids_by_prefix", "jobs_pkey"),
        ("submission_ids_by_prefix", "jobs_submission_idx"),
    ):
        plan = "\n".join(r[0] for r in raw_sql.execute("EXPLAIN " + query(name), params))
        assert index in plan and "Seq Scan" not in plan, plan
