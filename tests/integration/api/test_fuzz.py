"""Fuzz the HTTP API from its own OpenAPI schema (schemathesis): whatever is sent, no 500, and
every answer matches the schema it documents (status codes, content types, bodies).

A small example count per operation keeps this in CI's budget; run more by hand with
``DOCLANE_FUZZ_EXAMPLES=500 .venv/bin/pytest tests/integration/api/test_fuzz.py``.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.config import SchemathesisConfig

from tests.fixtures.api_server import ApiServer
from tests.fixtures.brokers import Broker

EXAMPLES = int(os.environ.get("DOCLANE_FUZZ_EXAMPLES", "8"))
#: A well-formed submission whose every source is refused (E105 here: nothing fuzzed lies in
#: the allowed roots) is answered 422 (413 for E103), as documented; no other operation may
#: refuse a schema-valid request so.
REFUSED_SOURCES = {
    "include-operation-id": "submit_v1_jobs_post",
    "checks": {
        "positive_data_acceptance": {
            "expected-statuses": ["2xx", "3xx", "401", "403", "404", "409", "413", "422", "5xx"]
        }
    },
}
#: A list cursor (``before``) of the documented shape whose time is no date (month 13) is 422,
#: as its description says: a pattern cannot spell the calendar.
DAMAGED_CURSOR = {
    "include-operation-id": "jobs_v1_jobs_get",
    "checks": {
        "positive_data_acceptance": {
            "expected-statuses": ["2xx", "3xx", "401", "403", "404", "409", "422", "5xx"]
        }
    },
}


@pytest.fixture
def api(
    make_api_server: Callable[..., ApiServer],
    migrated_database_url: str,
    redis_broker: Broker,
    tmp_path: Path,
) -> ApiServer:
    roots = tmp_path / "allowed"
    roots.mkdir()
    env = {
        **os.environ,
        "DOCLANE_DATABASE_URL": migrated_database_url,
        "DOCLANE_BROKER_URL": redis_broker.url,
        "DOCLING_MCP_ORIGIN": "http://127.0.0.1:9",
        # Fuzzed sources stay inside an empty folder: anything else is E105, never a real file.
        "DOCLANE_ALLOWED_ROOTS": str(roots),
        "DOCLANE_INBOX_DIR": str(tmp_path / "inbox"),
        "DOCLANE_INSPECT_TIMEOUT_S": "0.3",
    }
    return make_api_server(env)


def test_the_api_answers_every_request_as_its_schema_says(api: ApiServer) -> None:
    config = SchemathesisConfig.from_dict({"operations": [REFUSED_SOURCES, DAMAGED_CURSOR]})
    schema = schemathesis.openapi.from_url(api.url + "/openapi.json", config=config)
    headers = {"Authorization": f"Bearer {api.token}"}
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 10
    for operation in operations:

        @given(case=operation.as_strategy())
        @settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
        def check(case: schemathesis.Case) -> None:
            case.call_and_validate(headers=headers)

        check()
