"""What a process that never authenticates does not load: OAuth's libraries are a quarter of a
second of every CLI command's and every worker's start."""

from __future__ import annotations

import os

from tests.support.probes import printed_by


def test_the_cli_and_the_worker_load_no_oauth_library() -> None:
    probe = (
        "import sys, pipeline.cli, workers.app; "
        "names = ('authlib', 'joserfc', 'pipeline.mcp.oauth'); "
        "print(sorted(m for m in names if m in sys.modules))"
    )
    assert printed_by(probe) == "[]"


def test_a_publisher_loads_no_worker_runtime() -> None:
    """``doclane submit`` and the API publish through the Celery app; what a worker process
    converts with (MCP client, processor, resilience layer) is a worker's to load. The reconciler
    (which beat's schedule names) sweeps scratch folders: the processing package's lazy
    ``__init__``, its ``scratch`` module and its section of the settings tree are all of
    processing it may load."""
    probe = (
        "import sys, pipeline.submission.intake, workers.app, workers.publisher; "
        "names = ('pipeline.mcp.client', 'pipeline.resilience.facade', 'jsonschema'); "
        "light = ('pipeline.processing', 'pipeline.processing.scratch', "
        "'pipeline.processing.settings'); "
        "print(sorted(m for m in sys.modules if m in names "
        "or (m.startswith('pipeline.processing') and m not in light)))"
    )
    assert printed_by(probe) == "[]"


def test_the_cli_and_the_worker_load_no_boto3_until_they_meet_s3() -> None:
    probe = (
        "import sys, pipeline.cli, pipeline.store, pipeline.sources, workers.app; "
        "print(sorted(m for m in ('boto3', 'boto3.s3.transfer') if m in sys.modules))"
    )
    assert printed_by(probe) == "[]"


def test_the_configured_origins_are_read_without_httpx() -> None:
    """``doclane stats`` lists the breakers of the configured origins: reading them loaded httpx
    (and the rich, pygments and click its command line imports), a tenth of a second."""
    probe = (
        "import sys; from pipeline.mcp.endpoints import origin_of; "
        "from pipeline.settings.tree import read_settings; "
        "print([origin_of(e) for e in read_settings().mcp.endpoints], "
        "sorted(m for m in sys.modules if m.split('.')[0] in ('httpx', 'rich', 'pygments')))"
    )
    env = {**os.environ, "DOCLING_MCP_ORIGIN": "http://a:80, https://Bücher.example/mcp"}
    assert printed_by(probe, env) == "['http://a', 'https://bücher.example'] []"


def test_the_stats_command_loads_no_broker_client_until_it_must_ask_the_broker() -> None:
    """``doclane stats`` shows the queue depths the live workers' heartbeats carry: kombu (and
    the yaml, msgpack, amqp and billiard it imports) is a tenth of a second of its start, loaded
    only when no beat carries a count (``pipeline.cli.wiring.counted_fleet``)."""
    probe = (
        "import sys, pipeline.cli.admin_commands; "
        "from pipeline.cli.wiring import counted_fleet; "
        "from pipeline.settings.tree import read_settings; "
        "counted_fleet(read_settings().resilience); "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('kombu', 'celery', 'workers')))"
    )
    assert printed_by(probe) == "[]"


def test_no_command_module_loads_celery_until_a_command_runs_it() -> None:
    """The CLI's wiring imports workers/ (and so Celery and kombu, a third of a second) inside
    the functions that run a worker or publish: importing every command's module, as
    ``doclane --help`` does, loads none of them."""
    probe = (
        "import sys, pipeline.cli.wiring; from pipeline.cli import MODULES, module_commands; "
        "[module_commands(commands) for commands in MODULES]; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('kombu', 'celery', 'workers')))"
    )
    assert printed_by(probe) == "[]"
