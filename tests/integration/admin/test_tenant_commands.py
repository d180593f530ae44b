"""``doclane tenants set | list``, ``doclane submit --tenant``, ``doclane jobs --tenant`` and the
tenants of ``doclane stats``, through the real entry point on the test's database."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipeline.store.store import JobStore
from tests.fixtures.brokers import Broker
from tests.support.cli import doclane


@pytest.fixture
def env(migrated_database_url: str, redis_broker: Broker, tmp_path: Path) -> dict[str, str]:
    return {
        "DOCLANE_DATABASE_URL": migrated_database_url,
        "DOCLANE_BROKER_URL": redis_broker.url,
        "DOCLANE_INBOX_DIR": str(tmp_path / "inbox"),
        "DOCLANE_REDIS_URL": "",
    }


def _json(*args: str, env: dict[str, str], cwd: Path) -> dict[str, object]:
    done = doclane(*args, "--json", env=env, cwd=cwd)
    assert done.returncode == 0, done.stderr + done.stdout
    out: dict[str, object] = json.loads(done.stdout)
    return out


def test_set_changes_only_what_it_is_told_and_none_clears(
    env: dict[str, str], tmp_path: Path, store: JobStore
) -> None:
    made = _json(
        "tenants", "set", "team-a", "--max-running", "4", "--weight", "2", env=env, cwd=tmp_path
    )["tenant"]
    assert isinstance(made, dict)
    assert (made["weight"], made["max_running"], made["max_queued"]) == (2, 4, None)
    _json("tenants", "set", "team-a", "--max-queued", "10", env=env, cwd=tmp_path)
    paused = doclane("tenants", "set", "team-a", "--max-running", "0", env=env, cwd=tmp_path)
    assert paused.returncode == 0 and "(paused)" in paused.stdout
    tenant = store.tenants.get("team-a")
    assert tenant is not None and (tenant.weight, tenant.max_running, tenant.max_queued) == (
        2,
        0,
        10,
    )
    _json("tenants", "set", "team-a", "--max-running", "none", env=env, cwd=tmp_path)
    tenant = store.tenants.get("team-a")
    assert tenant is not None and (tenant.max_running, tenant.max_queued) == (None, 10)
    for bad in (
        ("Team-A",),
        ("ok", "--max-running", "lots"),
        ("ok", "--max-queued", "-1"),
        ("ok", "--weight", "0"),
    ):
        done = doclane("tenants", "set", *bad, env=env, cwd=tmp_path)
        assert done.returncode == 2 and "Traceback" not in done.stderr, (bad, done.stderr)
    assert store.tenants.get("ok") is None


def test_submit_as_a_tenant_list_its_jobs_and_see_it_in_list_and_stats(
    env: dict[str, str], tmp_path: Path
) -> None:
    for n in range(3):
        (tmp_path / f"doc-{n}.md").write_text(f"# Document {n}\n")
    unknown = doclane("submit", "doc-0.md", "--tenant", "team-a", env=env, cwd=tmp_path)
    assert unknown.returncode == 1 and "E116" in unknown.stderr + unknown.stdout
    _json("tenants", "set", "team-a", "--max-queued", "2", env=env, cwd=tmp_path)
    sent = doclane(
        "submit", "doc-0.md", "doc-1.md", "doc-2.md", "--tenant", "team-a", "--json",
        env=env, cwd=tmp_path,
    )  # fmt: skip
    out = json.loads(sent.stdout)
    assert sent.returncode == 1 and len(out["accepted"]) == 2  # a refusal: exit 1
    assert [r["code"] for r in out["rejected"]] == ["E115"]
    by_env = doclane(
        "submit", "doc-2.md", "--json", env={**env, "DOCLANE_TENANT": "default"}, cwd=tmp_path
    )
    assert by_env.returncode == 0, by_env.stderr
    theirs = {a["job_id"] for a in out["accepted"]}
    listed = _json("jobs", "--tenant", "team-a", env=env, cwd=tmp_path)
    assert {j["id"] for j in listed["jobs"]} == theirs  # type: ignore[union-attr,index]
    assert {j["tenant"] for j in listed["jobs"]} == {"team-a"}  # type: ignore[union-attr,index]
    tenants = _json("tenants", "list", env=env, cwd=tmp_path)["tenants"]
    queued = {t["tenant"]["name"]: t["queued"] for t in tenants}  # type: ignore[union-attr,index]
    assert queued == {"default": 1, "team-a": 2}
    table = doclane("tenants", "list", env=env, cwd=tmp_path)
    assert table.returncode == 0 and "team-a" in table.stdout and "queued" in table.stdout
    stats = doclane("stats", "--json", env=env, cwd=tmp_path)
    figures = {t["tenant"]["name"]: t for t in json.loads(stats.stdout)["tenants"]}
    assert (figures["team-a"]["queued"], figures["team-a"]["running"]) == (2, 0)
    text = doclane("stats", env=env, cwd=tmp_path)
    assert "tenants" in text.stdout and "team-a" in text.stdout
