"""Tracing's switch and its log fields: off and free without the OTEL_* variables (nothing of
OpenTelemetry is loaded), on with an OTLP endpoint, and then every log line inside a span
carries its trace and span ids beside the job id. The trace across processes is tested in
tests/e2e/test_tracing.py."""

from __future__ import annotations

import json
import os
import re
import textwrap

import pytest

from pipeline.support import tracing
from tests.support.probes import printed_by

#: An endpoint nothing listens on: spans are made, their export fails quietly later.
NOWHERE = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9", "OTEL_BSP_SCHEDULE_DELAY": "60000"}


def _environ(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    return {**env, **extra}


@pytest.mark.parametrize(
    ("env", "wanted"),
    [
        ({}, False),
        ({"OTEL_SERVICE_NAME": "x"}, False),  # a name alone exports nowhere
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, True),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4318/v1/traces"}, True),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_SDK_DISABLED": "true"}, False),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": " "}, False),
    ],
)
def test_tracing_is_wanted_only_with_an_endpoint_and_the_sdk_enabled(
    env: dict[str, str], wanted: bool
) -> None:
    assert tracing.wanted(env) is wanted


def test_off_the_cli_and_the_worker_load_nothing_of_opentelemetry() -> None:
    probe = (
        "import sys, pipeline.cli, workers.app, workers.runtime; "
        "from pipeline.submission import intake; from pipeline.support import tracing; "
        "print(tracing.configure('probe'), "
        "sorted(m for m in sys.modules if m.startswith('opentelemetry')))"
    )
    assert printed_by(probe, _environ()) == "False []"


def test_on_every_log_line_in_a_span_carries_its_trace_and_span_ids() -> None:
    probe = textwrap.dedent(
        """
        import io, logging
        from pipeline.settings.tree import read_settings
        from pipeline.support import logs, tracing
        print(tracing.configure("probe"))
        out = io.StringIO()
        logs.configure_logging(read_settings(logs=dict(format=LOG_FORMAT)).logs, out)
        log = logging.getLogger("probe")
        log.info("outside")
        with logs.job_context("job-1"), tracing.span("work"):
            log.info("inside")
        print(out.getvalue())
        """
    )
    for log_format in ("text", "json"):
        done = printed_by(probe.replace("LOG_FORMAT", repr(log_format)), _environ(**NOWHERE))
        enabled, outside, inside = done.splitlines()
        assert enabled == "True"
        if log_format == "text":
            assert "origin=-] outside" in outside  # no span: the line reads as it always did
            assert re.search(
                r"\[job=job-1 .* trace=[0-9a-f]{32} span=[0-9a-f]{16}\] inside", inside
            )
        else:
            assert json.loads(outside)["trace_id"] == "-"
            line = json.loads(inside)
            assert line["job_id"] == "job-1"
            assert re.fullmatch(r"[0-9a-f]{32}", line["trace_id"])
            assert re.fullmatch(r"[0-9a-f]{16}", line["span_id"])
