"""deploy/prometheus, checked by Prometheus' own promtool (Debian's `prometheus` package,
installed by scripts/test): the alert rules are valid, and their unit tests prove each alert
fires and stays quiet when it should (and notice a rule that changed)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.support.deploy_tools import run_tool

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "deploy" / "prometheus"
#: The alerts the rules must hold (docs/operations.md, Observability, lists what each means).
ALERTS = {
    "DoclaneDatabaseUnreachable",
    "DoclaneNoLiveWorkers",
    "DoclaneBreakerOpen",
    "DoclaneFailuresByCode",
    "DoclaneOldestQueuedJobAgeGrowing",
    "DoclaneWebhookDeliveriesDead",
}


def promtool(
    *args: str, stdin: str | None = None, cwd: Path = RULES
) -> subprocess.CompletedProcess[str]:
    return run_tool("promtool", *args, cwd=cwd, stdin=stdin)


def _alerts(path: Path) -> dict[str, dict[str, object]]:
    groups = yaml.safe_load(path.read_text())["groups"]
    return {rule["alert"]: rule for group in groups for rule in group["rules"] if "alert" in rule}


def test_the_rules_pass_promtool_check_rules() -> None:
    result = promtool("check", "rules", "alerts.yaml")
    assert result.returncode == 0, result.stdout + result.stderr


def test_every_alert_says_what_to_do_and_has_a_severity() -> None:
    alerts = _alerts(RULES / "alerts.yaml")
    assert set(alerts) == ALERTS
    for name, rule in alerts.items():
        annotations = rule["annotations"]
        assert isinstance(annotations, dict)
        assert annotations["summary"] and len(str(annotations["description"])) > 80, name
        assert rule["labels"] == {"severity": rule["labels"]["severity"]}  # type: ignore[index]


def test_the_unit_tests_pass_and_test_every_alert() -> None:
    result = promtool("test", "rules", "alerts.test.yaml")
    assert result.returncode == 0, result.stdout + result.stderr
    tests = yaml.safe_load((RULES / "alerts.test.yaml").read_text())["tests"]
    tested = {case["alertname"] for test in tests for case in test["alert_rule_test"]}
    assert tested == ALERTS
    for alert in ALERTS:  # each alert once expected to fire and once expected to stay quiet
        outcomes = {
            bool(case["exp_alerts"])
            for test in tests
            for case in test["alert_rule_test"]
            if case["alertname"] == alert
        }
        assert outcomes == {True, False}, alert


@pytest.mark.parametrize(
    ("before", "after"),
    [
        ('doclane_up{part="database"} == 0', 'doclane_up{part="database"} == 1'),
        ("* 60 > 1", "* 60 > 5"),
        (
            "doclane_oldest_queued_job_age_seconds > 900",
            "doclane_oldest_queued_job_age_seconds > 9000",
        ),
        ('{state="dead"} > 0', '{state="failed"} > 0'),
    ],
)
def test_the_unit_tests_catch_a_broken_rule(tmp_path: Path, before: str, after: str) -> None:
    rules = (RULES / "alerts.yaml").read_text()
    assert before in rules
    (tmp_path / "alerts.yaml").write_text(rules.replace(before, after))
    shutil.copy(RULES / "alerts.test.yaml", tmp_path / "alerts.test.yaml")
    result = promtool("test", "rules", "alerts.test.yaml", cwd=tmp_path)
    assert result.returncode != 0, "the unit tests did not notice the change"
