"""compose's `monitoring` profile: Prometheus scrapes the API with doclane's alerts loaded, and
Grafana is provisioned with the Prometheus data source and doclane's dashboard.

Neither runs here (no Docker); what they would read is checked instead: promtool accepts the
Prometheus configuration with its rule file, the files compose mounts exist where the
provisioning expects them, and every dashboard query is valid PromQL over the data source the
provisioning declares (tests/deploy/test_metrics_lint.py checks that /metrics exposes what the
queries read).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from tests.support.deploy_tools import ROOT, run_tool

DEPLOY = ROOT / "deploy"
DASHBOARD = DEPLOY / "grafana" / "dashboards" / "doclane.json"


def _mounts(service: dict[str, Any]) -> dict[str, Path]:
    """Container path -> host path, for the bind mounts of a rendered service."""
    out = {}
    for volume in service.get("volumes", []):
        if isinstance(volume, dict) and volume.get("type") == "bind":
            out[volume["target"]] = Path(volume["source"])
        elif isinstance(volume, str) and volume.startswith(("/", ".")):
            source, target = volume.split(":")[:2]
            out[target] = Path(source)
    return out


def test_promtool_accepts_the_prometheus_configuration_and_its_rules() -> None:
    result = run_tool("promtool", "check", "config", "prometheus.yml", cwd=DEPLOY / "prometheus")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 rule files found" in result.stdout


def test_prometheus_scrapes_the_api_service(rendered: dict[str, Any]) -> None:
    config = yaml.safe_load((DEPLOY / "prometheus" / "prometheus.yml").read_text())
    (job,) = config["scrape_configs"]
    (target,) = job["static_configs"][0]["targets"]
    host, port = target.split(":")
    api = rendered["services"][host]
    assert api["command"][-2:] == ["--port", port]
    prometheus = rendered["services"]["prometheus"]
    assert _mounts(prometheus)["/etc/prometheus/doclane"].name == "prometheus"
    assert "--config.file=/etc/prometheus/doclane/prometheus.yml" in prometheus["command"]


def test_grafana_is_provisioned_with_the_data_source_and_the_dashboard(
    project: Path, rendered: dict[str, Any]
) -> None:
    """Compose renders a scratch copy of the project (conftest): mounts are read relative to
    it, the files from the repository."""
    mounts = {
        target: ROOT / source.relative_to(project)
        for target, source in _mounts(rendered["services"]["grafana"]).items()
    }
    provisioning = mounts["/etc/grafana/provisioning"]
    assert provisioning == DEPLOY / "grafana" / "provisioning"
    provider = yaml.safe_load((provisioning / "dashboards" / "doclane.yaml").read_text())
    path = provider["providers"][0]["options"]["path"]
    assert mounts[path] == DASHBOARD.parent
    source = yaml.safe_load((provisioning / "datasources" / "prometheus.yaml").read_text())
    (datasource,) = source["datasources"]
    assert datasource["url"] == "http://prometheus:9090"
    dashboard = json.loads(DASHBOARD.read_text())
    for panel in dashboard["panels"]:
        assert panel["datasource"]["uid"] == datasource["uid"], panel["title"]
        assert panel["targets"], panel["title"]


def test_the_dashboard_shows_what_the_issue_asks_for() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    queries = " ".join(t["expr"] for p in dashboard["panels"] for t in p["targets"])
    for family in (
        "doclane_conversions_total",  # throughput
        "doclane_conversion_duration_seconds",  # latency by tier
        "doclane_job_failures_total",  # failures by code
        "doclane_queue_backlog",  # the work waiting, from PostgreSQL
        "doclane_breaker_state",
        "doclane_workers",
    ):
        assert family in queries, family


def test_every_dashboard_query_is_valid_promql(tmp_path: Path) -> None:
    """promtool parses each query as a recording rule's expression: a typo fails here."""
    dashboard = json.loads(DASHBOARD.read_text())
    rules = [
        {"record": f"doclane:panel_{panel['id']}_{target['refId']}", "expr": target["expr"]}
        for panel in dashboard["panels"]
        for target in panel["targets"]
    ]
    (tmp_path / "queries.yaml").write_text(
        yaml.safe_dump({"groups": [{"name": "q", "rules": rules}]})
    )
    result = run_tool("promtool", "check", "rules", "queries.yaml", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
