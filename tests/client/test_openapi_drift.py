"""The client and the API it speaks must not drift apart.

The client's models are generated from the API's OpenAPI document
(clients/python/scripts/generate_models.py); here the running ``doclane api``'s document is
rendered again and must give the committed models.py exactly. The paths, query parameters and
body fields the client sends must be the document's, and the client's major version the API's.
When this fails after an API change: run the generator, read the diff, and adapt the client.
"""

from __future__ import annotations

import difflib
import importlib.util
from pathlib import Path
from types import ModuleType
from typing import Any

import doclane_client
import pytest
from doclane_client import API_VERSION, __version__

from tests.fixtures.api_server import ApiServer

CLIENT = Path(__file__).resolve().parents[2] / "clients" / "python"

#: (method, path) of every request the client makes.
CALLS = {
    ("post", "/v1/jobs"),
    ("get", "/v1/jobs"),
    ("get", "/v1/jobs/{job_id}"),
    ("get", "/v1/jobs/{job_id}/result/{fmt}"),
    ("post", "/v1/jobs/{job_id}/cancel"),
    ("post", "/v1/jobs/{job_id}/retry"),
    ("get", "/v1/stats"),
}
#: What ``Client.jobs`` and ``wait`` send as query parameters.
LIST_PARAMETERS = {"state", "error_code", "since", "queue", "submission", "tenant"}
LIST_PARAMETERS |= {"limit", "before"}
#: What ``Asked`` sends in a JSON submission and in an upload's form.
BODY_FIELDS = {"sources", "to", "priority", "options", "webhook", "tenant"}
FORM_FIELDS = {
    "file",
    "to",
    "priority",
    "tenant",
    "webhook",
    "pages",
    "ocr_lang",
    "text_layer_only",
    "password_env",
}


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "generate_models", CLIENT / "scripts" / "generate_models.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def document(api_on_test_database: ApiServer) -> dict[str, Any]:
    answer = api_on_test_database.get("/openapi.json", token=None)
    assert answer.status_code == 200
    found: dict[str, Any] = answer.json()
    return found


def test_the_models_are_the_api_documents(document: dict[str, Any]) -> None:
    generator = _generator()
    committed = Path(doclane_client.__file__).with_name("models.py")
    assert committed == generator.TARGET
    wanted = generator.render(document)
    diff = "".join(
        difflib.unified_diff(
            committed.read_text().splitlines(keepends=True),
            wanted.splitlines(keepends=True),
            "models.py (committed)",
            "models.py (from the running API)",
        )
    )
    assert not diff, (
        "the API's schema and the client's models differ: run "
        "`python clients/python/scripts/generate_models.py` and adapt the client\n" + diff
    )


def test_the_client_speaks_the_api_version(document: dict[str, Any]) -> None:
    assert document["info"]["version"] == API_VERSION == __version__.split(".")[0]


def test_every_request_the_client_makes_is_in_the_document(document: dict[str, Any]) -> None:
    paths = document["paths"]
    offered = {(method, path) for path, ops in paths.items() for method in ops}
    assert offered >= CALLS, CALLS - offered
    listed = {p["name"] for p in paths["/v1/jobs"]["get"]["parameters"]}
    assert listed >= LIST_PARAMETERS, LIST_PARAMETERS - listed
    body = paths["/v1/jobs"]["post"]["requestBody"]["content"]
    assert set(body["application/json"]["schema"]["properties"]) >= BODY_FIELDS
    assert set(body["multipart/form-data"]["schema"]["properties"]) >= FORM_FIELDS


def test_a_drifted_schema_is_caught(document: dict[str, Any]) -> None:
    """The comparison itself bites: a field the API added shows up in the rendering."""
    generator = _generator()
    job = document["components"]["schemas"]["Job"]
    job["properties"]["shard"] = {"type": "string", "title": "Shard", "default": "a"}
    rendered = generator.render(document)
    assert '    shard: str = "a"' in rendered
    assert rendered != Path(doclane_client.__file__).with_name("models.py").read_text()
