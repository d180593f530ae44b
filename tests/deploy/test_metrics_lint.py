"""``/metrics`` as Prometheus' own lint reads it: a real scrape of ``doclane api`` over a
database with jobs in it passes ``promtool check metrics`` (names, units, ``_total`` counters),
and holds every family the alerts (deploy/prometheus) and the dashboard read."""

from __future__ import annotations

import re
from collections.abc import Callable

from pipeline.jobs.model import JobState
from pipeline.store.store import JobStore
from tests.fixtures.api_server import ApiServer
from tests.support.deploy_tools import ROOT, run_tool
from tests.support.store_builders import job_in_state

#: Every family deploy/ reads: the alert rules and the Grafana dashboard.
READERS = (
    ROOT / "deploy" / "prometheus" / "alerts.yaml",
    ROOT / "deploy" / "grafana" / "dashboards" / "doclane.json",
)


def _families_read_by_deploy() -> set[str]:
    names: set[str] = set()
    for reader in READERS:
        if reader.exists():
            names |= set(re.findall(r"\b(doclane_[a-z_]+)", reader.read_text()))
    # a histogram is read through its series
    return {re.sub(r"_(bucket|sum|count)$", "", n) for n in names}


def test_a_real_scrape_passes_promtool_check_metrics_and_has_what_deploy_reads(
    api_on_test_database: ApiServer, make_store: Callable[[], JobStore]
) -> None:
    store = make_store()
    for state in (JobState.QUEUED, JobState.SUCCEEDED, JobState.FAILED):
        job_in_state(store, state)
    scrape = api_on_test_database.get("/metrics", token=None)
    assert scrape.status_code == 200
    lint = run_tool("promtool", "check", "metrics", cwd=ROOT, stdin=scrape.text)
    assert lint.returncode == 0, lint.stdout + lint.stderr
    exposed = set(re.findall(r"^# TYPE (\S+) ", scrape.text, re.M))
    wanted = _families_read_by_deploy()
    assert "doclane_oldest_queued_job_age_seconds" in wanted
    # A counter family is exposed as <name>_total (the TYPE line names it without the suffix
    # in the classic format), so either spelling counts.
    missing = {n for n in wanted if n not in exposed and n.removesuffix("_total") not in exposed}
    assert not missing, f"deploy/ reads families /metrics does not expose: {sorted(missing)}"
    small = re.search(r'^doclane_oldest_queued_job_age_seconds\{queue="doclane.small"\} (\S+)',
                      scrape.text, re.M)  # fmt: skip
    assert small and float(small.group(1)) >= 0.0
