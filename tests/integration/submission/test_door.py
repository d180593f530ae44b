"""The door: a submission no configured server can serve is refused at submission (E305),
asked of real (fake) MCP servers once and kept; what cannot be asked passes as before."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from errors import MissingCapability
from pipeline.jobs.formats import Formats
from pipeline.jobs.model import JobState
from pipeline.jobs.options import ConversionOptions
from pipeline.jobs.request import SubmissionRequest
from pipeline.profiles.settings import ProfileSettings
from pipeline.queues import RecordingPublisher
from pipeline.store.store import JobStore
from pipeline.submission import door as door_module
from pipeline.submission.door import Door, admit, process_door, server_tools
from pipeline.submission.intake import enqueue
from tests.fixtures.brokers import Broker
from tests.fixtures.fake_server import FakeServer
from tests.fixtures.samples import write_sample

PAGES = ConversionOptions.parse({"pages": "1-2"})
NONE = ConversionOptions()


def tools_asked(server: FakeServer) -> int:
    return int(server.stats()["requests_by_method"].get("tools/list", 0))


def refused(door: Door, formats: str, options: ConversionOptions = NONE) -> str:
    with pytest.raises(MissingCapability) as caught:
        door.admit(Formats.parse(formats), options)
    assert caught.value.code == "E305" and not caught.value.retryable
    return caught.value.message


def test_options_on_a_docling_mcp_server_are_refused_after_asking_it_once(
    fake_server: FakeServer,
) -> None:
    door = Door([fake_server.url], ProfileSettings(), server_tools)

    message = refused(door, "md", PAGES)
    assert "docling-mcp server cannot honour conversion options (pages)" in message
    assert "no configured server" in message
    assert "json" in refused(door, "md,json")  # no DOCLANE_SERVER_CACHE_DIR: no Docling JSON
    door.admit(Formats.parse("md"), NONE)

    assert tools_asked(fake_server) == 1  # the answer was kept for the next submissions


def test_json_passes_where_the_workers_read_the_servers_cache(
    fake_server: FakeServer, tmp_path: Path
) -> None:
    door = Door([fake_server.url], ProfileSettings(server_cache_dir=tmp_path), server_tools)
    door.admit(Formats.parse("md,json"), NONE)


def test_a_per_format_server_is_judged_by_its_export_tools(
    fake_server_factory: Callable[..., FakeServer],
) -> None:
    server = fake_server_factory(profile="per-format")
    door = Door([server.url], ProfileSettings(), server_tools)

    door.admit(Formats.parse("md,html,json"), NONE)
    assert "per-format cannot give text" in refused(door, "md,text")


def test_one_server_of_several_that_can_serve_is_enough(
    fake_server: FakeServer, fake_server_factory: Callable[..., FakeServer]
) -> None:
    per_format = fake_server_factory(profile="per-format")
    door = Door([fake_server.url, per_format.url], ProfileSettings(), server_tools)

    door.admit(Formats.parse("html"), NONE)  # docling-mcp cannot, per-format can
    message = refused(door, "md", PAGES)  # neither takes options
    assert "server 1: " in message and "server 2: " in message
    assert fake_server.url not in message  # the servers' addresses are not the submitter's


def test_a_server_that_does_not_answer_leaves_the_judging_to_the_workers(
    fake_server_factory: Callable[..., FakeServer],
) -> None:
    server = fake_server_factory()
    url = server.url
    server.stop()
    asked: list[str] = []

    def counted(endpoint: str) -> frozenset[str]:
        asked.append(endpoint)
        return server_tools(endpoint)

    door = Door([url], ProfileSettings(), counted)
    door.admit(Formats.parse("md"), PAGES)
    door.admit(Formats.parse("md"), PAGES)
    assert asked == [url]  # a server that is down costs one attempt, not one a submission


def test_what_the_configured_profile_can_never_do_is_refused_without_asking() -> None:
    def never(endpoint: str) -> frozenset[str]:
        raise AssertionError(f"asked {endpoint}")

    forced = Door(["http://127.0.0.1:9/mcp"], ProfileSettings(profile="docling-mcp"), never)
    assert "no server of the configured profile" in refused(forced, "md", PAGES)
    assert "cannot give html" in refused(forced, "html")

    rs = Door(["http://127.0.0.1:9/mcp"], ProfileSettings(profile="docling-rs"), never)
    rs.admit(Formats.parse("md,json,html,text,chunks"), PAGES)  # its contract never varies

    auto = Door(["http://127.0.0.1:9/mcp"], ProfileSettings(), never)
    auto.admit(Formats.parse("md"), NONE)  # every profile gives Markdown


def test_enqueue_refuses_before_any_job_is_made(
    store: JobStore, fake_server: FakeServer, tmp_path: Path
) -> None:
    doc = write_sample(tmp_path / "docs", "md", 1)
    publisher = RecordingPublisher()
    door = Door([fake_server.url], ProfileSettings(), server_tools)

    with pytest.raises(MissingCapability):
        enqueue(
            SubmissionRequest([str(doc)], options=PAGES),
            publisher=publisher,
            store=store,
            door=door,
        )
    assert store.reads.count_in_flight()[JobState.QUEUED] == 0 and publisher.messages == []

    made = enqueue(SubmissionRequest([str(doc)]), publisher=publisher, store=store, door=door)
    assert len(made.accepted) == 1


def test_the_process_door_asks_the_configured_servers(
    fake_server: FakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DOCLING_MCP_ORIGIN", fake_server.url)
    monkeypatch.delenv("DOCLANE_PROFILE", raising=False)
    door = process_door()
    assert list(door.endpoints) == [fake_server.url] and process_door() is door
    refused(door, "md", PAGES)


def test_markdown_alone_reads_no_server_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    """The common submission builds no door: no MCP settings read, no client loaded."""

    def no_door() -> Door:
        raise AssertionError("a door was built")

    monkeypatch.setattr(door_module, "process_door", no_door)
    admit(Formats.parse("md"), NONE)
    with pytest.raises(AssertionError, match="a door was built"):
        admit(Formats.parse("md"), PAGES)


def test_doclane_submit_says_e305_before_making_a_job(
    fake_server: FakeServer,
    migrated_database_url: str,
    redis_broker: Broker,
    make_store: Callable[[], JobStore],
    tmp_path: Path,
) -> None:
    (tmp_path / "note.md").write_text("# a note\n")
    env = {
        **os.environ,
        "DOCLANE_DATABASE_URL": migrated_database_url,
        "DOCLANE_BROKER_URL": redis_broker.url,
        "DOCLING_MCP_ORIGIN": fake_server.url,  # docling-mcp: Markdown, no options
    }

    def submit(*args: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "pipeline.cli", "submit", "note.md", *args, "--json"]
        return subprocess.run(
            command, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False
        )

    for args in (("--pages", "1"), ("--to", "md,html")):
        done = submit(*args)
        out = json.loads(done.stdout)
        assert done.returncode == 1 and out["error"]["code"] == "E305", done.stderr
    assert make_store().reads.count_in_flight()[JobState.QUEUED] == 0
    assert json.loads(submit().stdout)["ok"] is True
