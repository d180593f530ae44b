"""A NUL byte in a text value is E117 from every store call, never a server error.

PostgreSQL's text holds none, and the refusal comes from three places: psycopg itself (a text
parameter, before anything is sent), the server (a binary COPY's value) and the server's JSON
(a ``\\u0000`` in a jsonb value). The store's one translation turns each into the caller's
``InvalidArgument``; any other data error passes through as it is.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import psycopg
import pytest

from errors import InvalidArgument
from pipeline.store.access import AuditEntry, AuditFilter
from pipeline.store.admin import JobFilter
from pipeline.store.store import JobStore
from tests.support.store_builders import new_job

CALLS: dict[str, Callable[[JobStore], Any]] = {
    "a list's filter": lambda s: s.admin.list_jobs(JobFilter(queue="doclane.\x00small")),
    "the trail's filter": lambda s: s.audit.list(AuditFilter(actor="ops\x00")),
    "a tenant's name": lambda s: s.tenants.get("team\x00a"),
    "a short id's tenant": lambda s: s.reads.job_id("6f1d2c1e", tenant="team\x00a"),
    "a job's source (binary COPY)": lambda s: s.submissions.create(new_job(source_uri="/a\x00.md")),
    "a JSON detail": lambda s: s.audit.record(
        AuditEntry(actor="ops", action="cancel", outcome="ok", detail={"source": "a\x00b"})
    ),
}


@pytest.mark.parametrize("call", list(CALLS.values()), ids=list(CALLS))
def test_a_nul_in_text_is_an_invalid_argument(store: JobStore, call: Callable[..., Any]) -> None:
    with pytest.raises(InvalidArgument) as refused:
        call(store)
    assert refused.value.code == "E117"
    assert "cannot contain a NUL byte" in refused.value.message
    assert isinstance(refused.value.__cause__, psycopg.DataError)
    assert not any(store.reads.count_in_flight().values())  # no job was made


def test_any_other_data_error_is_left_as_it_is(store: JobStore) -> None:
    with pytest.raises(psycopg.errors.DivisionByZero), store.pool.connection("dividing") as conn:
        conn.execute("SELECT 1 / 0")
