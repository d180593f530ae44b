"""compose.yaml: Compose accepts it, and it is the fleet docs/operations.md describes.

Each test names the property an operator relies on; the structure is read from docker-compose's
own rendering (anchors merged, .env applied), so the checks see what Compose would run.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

import yaml

from tests.support.deploy_tools import ALL_PROFILES, ROOT, compose

#: The services an operator runs the fleet with (docs/operations.md), and the profiled ones.
CORE_SERVICES = {"postgres", "redis", "docling-mcp", "migrate", "worker", "beat", "api", "flower"}
PROFILED_SERVICES = {
    "docling-serve": "serve",
    "worker-stdio": "stdio",
    "worker-large": "tiers",
    "docling-rs-mcp": "rs",
    "worker-rs": "rs",
    "prometheus": "monitoring",
    "grafana": "monitoring",
}
#: The services that run doclane itself and must see the shared folder.
DOCLANE_SERVICES = ("migrate", "worker", "beat", "api", "worker-stdio", "worker-large", "worker-rs")
SHARED_MOUNT = "/srv/doclane"


def _env_example_names() -> set[str]:
    text = (ROOT / ".env.example").read_text()
    return set(re.findall(r"^#?\s*([A-Z][A-Z0-9_]+)=", text, re.M))


def _depends(service: dict[str, Any]) -> dict[str, str]:
    return {name: spec["condition"] for name, spec in (service.get("depends_on") or {}).items()}


def _volume_targets(service: dict[str, Any]) -> dict[str, str]:
    """Mount target -> named volume, for the named volumes a service mounts."""
    mounts = {}
    for volume in service.get("volumes", []):
        if isinstance(volume, str):
            source, _, target = volume.partition(":")
            mounts[target.split(":")[0]] = source
        elif volume.get("type", "volume") == "volume":
            mounts[volume["target"]] = volume["source"]
    return mounts


# ---- Compose itself -----------------------------------------------------------------------


def test_docker_compose_config_accepts_the_file_with_env_example_as_env(project: Path) -> None:
    for profiles in ((), ALL_PROFILES):
        args = [arg for profile in profiles for arg in ("--profile", profile)]
        result = compose(project, *args, "config", "-q")
        assert result.returncode == 0, result.stderr
        # An unset variable is only a warning to Compose, and a blank password to PostgreSQL.
        assert "is not set" not in result.stderr, result.stderr


def test_a_fresh_clone_without_env_passes_docker_compose_config(tmp_path: Path) -> None:
    """No .env (nobody copied .env.example yet): Compose must still read the file, with no
    variable unset, and hand the containers .env.example's defaults."""
    fresh = tmp_path / "fresh-clone"
    fresh.mkdir()
    shutil.copy(ROOT / "compose.yaml", fresh / "compose.yaml")
    shutil.copytree(ROOT / "docker", fresh / "docker")
    shutil.copy(ROOT / ".env.example", fresh / ".env.example")
    args = [arg for profile in ALL_PROFILES for arg in ("--profile", profile)]
    for profiles in ([], args):
        result = compose(fresh, *profiles, "config", "-q")
        assert result.returncode == 0, result.stderr
        assert "is not set" not in result.stderr, result.stderr
    rendered = compose(fresh, *args, "config")
    assert rendered.returncode == 0, rendered.stderr
    services = yaml.safe_load(rendered.stdout)["services"]
    defaults = dict(
        re.findall(r"^([A-Z][A-Z0-9_]+)=(.*)$", (ROOT / ".env.example").read_text(), re.M)
    )
    password = services["postgres"]["environment"]["POSTGRES_PASSWORD"]
    assert password == defaults["POSTGRES_PASSWORD"]
    assert f":{password}@postgres:" in services["worker"]["environment"]["DOCLANE_DATABASE_URL"]
    # The containers got .env.example: a doclane setting compose.yaml does not set is there.
    assert services["worker"]["environment"]["DOCLANE_LEASE_S"] == defaults["DOCLANE_LEASE_S"]


def test_compose_defaults_are_the_values_of_env_example() -> None:
    """One value for each variable: compose.yaml's ${VAR:-default} is .env.example's VAR (but
    DOCLANE_ENV_FILE, whose fallback is the file with the defaults)."""
    text = (ROOT / "compose.yaml").read_text()
    listed = dict(
        re.findall(r"^([A-Z][A-Z0-9_]+)=(.*)$", (ROOT / ".env.example").read_text(), re.M)
    )
    defaults = re.findall(r"\$\{([A-Za-z_][A-Za-z0-9_]*):-([^}]*)\}", text)
    assert defaults
    for name, default in defaults:
        if name == "DOCLANE_ENV_FILE":
            assert default == ".env.example" and listed[name] == ".env"
            continue
        assert listed[name] == default, (
            f"{name}: compose.yaml {default!r}, .env.example {listed[name]!r}"
        )
    bare = set(re.findall(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}", text))
    assert not bare, f"variables without a default break a fresh clone: {sorted(bare)}"


def test_every_variable_compose_reads_is_documented_in_configuration_md() -> None:
    text = (ROOT / "compose.yaml").read_text()
    documented = (ROOT / "docs" / "configuration.md").read_text()
    for name in set(re.findall(r"\$\{([A-Za-z_][A-Za-z0-9_]*)", text)):
        row = re.search(rf"^\| `{name}` \|[^|]*\| (.*) \|$", documented, re.M)
        assert row and row.group(1) != "(undocumented)", f"{name} is not in configuration.md"


def test_every_variable_compose_substitutes_is_in_env_example() -> None:
    text = (ROOT / "compose.yaml").read_text()
    used = set(re.findall(r"\$\{([A-Za-z_][A-Za-z0-9_]*)", text))
    assert used, "compose.yaml reads settings from .env"
    missing = used - _env_example_names()
    assert not missing, f"add to .env.example: {sorted(missing)}"


def test_every_doclane_setting_compose_sets_exists(rendered: dict[str, Any]) -> None:
    """A misspelt setting in `environment:` would be silently ignored by doclane."""
    known = _env_example_names()
    for name in DOCLANE_SERVICES:
        environment = rendered["services"][name].get("environment") or {}
        ours = {key for key in environment if key.startswith(("DOCLANE_", "MCP_"))}
        unknown = ours - known
        assert not unknown, f"{name} sets settings doclane does not have: {sorted(unknown)}"


def test_no_secret_is_written_into_compose_yaml() -> None:
    text = (ROOT / "compose.yaml").read_text()
    for line in text.splitlines():
        code = line.split("#", 1)[0]
        # A secret's variable may have a default only if it is empty (no secret written here);
        # then the substitution is one value, whatever the variable's name says.
        for secret, default in re.findall(
            r"\$\{(\w*(?:PASSWORD|TOKEN|SECRET|API_KEY)\w*):-([^}]*)\}", code
        ):
            assert default == "", f"a literal default for {secret} in compose.yaml: {line}"
        code = re.sub(r"\$\{[^}]*\}", "${VAR}", code)
        match = re.search(r"(PASSWORD|TOKEN|SECRET|API_KEY)\w*:\s*(\S+)", code)
        if match:
            assert match.group(2).startswith("${"), f"a literal secret in compose.yaml: {line}"


# ---- services and health ------------------------------------------------------------------


def test_the_fleet_services_are_there(rendered: dict[str, Any]) -> None:
    services = rendered["services"]
    assert set(services) >= CORE_SERVICES
    for name in CORE_SERVICES:
        assert not services[name].get("profiles"), f"{name} must start without a profile"
    for name, profile in PROFILED_SERVICES.items():
        assert services[name].get("profiles") == [profile]


def test_every_long_running_service_has_a_healthcheck(rendered: dict[str, Any]) -> None:
    for name, service in rendered["services"].items():
        if name == "migrate":
            continue  # one-shot: its exit status is its health
        check = service.get("healthcheck") or {}
        assert not check.get("disable"), name
        assert check.get("test") and check["test"][0] in ("CMD", "CMD-SHELL"), name


def test_dependencies_wait_for_health_and_for_migrations(rendered: dict[str, Any]) -> None:
    services = rendered["services"]
    for name, service in services.items():
        for target, condition in _depends(service).items():
            if target == "migrate":
                assert condition == "service_completed_successfully", name
            else:
                assert condition == "service_healthy", f"{name} -> {target}"
                assert services[target].get("healthcheck"), f"{target} has no healthcheck"
    for name in ("worker", "beat", "api", "worker-stdio", "worker-large"):
        depends = _depends(services[name])
        assert depends.get("migrate") == "service_completed_successfully", name
        assert depends.get("postgres") == "service_healthy", name
    assert _depends(services["migrate"]) == {"postgres": "service_healthy"}
    assert services["migrate"]["command"] == ["db", "migrate"]
    assert services["migrate"].get("restart") == "no"


def test_workers_scale_and_beat_stays_single(rendered: dict[str, Any]) -> None:
    worker = rendered["services"]["worker"]
    # A container_name or a published port would make `--scale worker=4` fail.
    assert "container_name" not in worker
    assert not worker.get("ports")
    assert worker["command"][:2] == ["worker", "--no-beat"]
    assert _depends(worker).get("docling-mcp") == "service_healthy"
    large = rendered["services"]["worker-large"]
    assert "container_name" not in large and not large.get("ports")
    queues = large["command"][large["command"].index("--queues") + 1].split(",")
    assert queues == ["doclane.large", "doclane.control"]
    beat = rendered["services"]["beat"]
    assert beat["command"] == ["beat"]
    assert (beat.get("deploy") or {}).get("replicas", 1) == 1
    for name, service in rendered["services"].items():
        if name != "beat":
            assert "beat" not in service.get("command", [])[:1], name
            assert "--beat" not in service.get("command", []), name


def test_api_serves_on_all_interfaces_and_is_checked_on_healthz(rendered: dict[str, Any]) -> None:
    api = rendered["services"]["api"]
    assert api["command"] == ["api", "--host", "0.0.0.0", "--port", "8080"]
    assert "/healthz" in " ".join(api["healthcheck"]["test"])


def test_flower_speaks_to_the_workers_through_doclanes_app(rendered: dict[str, Any]) -> None:
    """A bare `celery flower` leaves Redis bindings the workers cannot parse (workers.monitor)."""
    flower = rendered["services"]["flower"]
    assert flower["build"]["target"] == "flower"
    dockerfile = (ROOT / flower["build"]["dockerfile"]).read_text()
    assert 'ENTRYPOINT ["celery", "--app", "workers.monitor", "flower"]' in dockerfile
    assert (
        flower["environment"]["DOCLANE_BROKER_URL"]
        == (rendered["services"]["worker"]["environment"]["DOCLANE_BROKER_URL"])
    )


def test_the_docling_server_is_not_published(rendered: dict[str, Any]) -> None:
    """Bound to 0.0.0.0 its DNS-rebinding protection is off: the compose network only."""
    server = rendered["services"]["docling-mcp"]
    assert "0.0.0.0" in server["command"]
    assert not server.get("ports") and not server.get("network_mode")
    assert server["environment"]["DOCLING_MCP_CONVERSION_MODE"] == "local"
    assert int(server["environment"]["DOCLING_MCP_CACHE_MAX_DOCUMENTS"]) > 10
    for name in ("worker", "api", "beat"):
        origin = rendered["services"][name]["environment"]["DOCLING_MCP_ORIGIN"]
        assert origin == "http://docling-mcp:8000"
    assert not rendered["services"]["docling-serve"].get("ports")


def test_postgres_and_redis_keep_their_data_in_named_volumes(rendered: dict[str, Any]) -> None:
    volumes = set(rendered.get("volumes") or {})
    assert _volume_targets(rendered["services"]["postgres"]) == {
        "/var/lib/postgresql/data": "pgdata"
    }
    assert "pgdata" in volumes and "redis-data" in volumes


def test_the_shared_folder_is_at_the_same_path_for_doclane_and_the_server(
    rendered: dict[str, Any],
) -> None:
    services = rendered["services"]
    for name in ("worker", "worker-large", "api", "docling-mcp", "worker-stdio"):
        assert _volume_targets(services[name]).get(SHARED_MOUNT) == "shared", name
    worker_env = services["worker"]["environment"]
    assert worker_env["DOCLANE_INBOX_DIR"].startswith(f"{SHARED_MOUNT}/")
    # The worker reads the Docling JSON where the server writes it.
    assert (
        worker_env["DOCLANE_SERVER_CACHE_DIR"]
        == services["docling-mcp"]["environment"]["CACHE_DIR"]
    )
    assert worker_env["DOCLANE_SERVER_CACHE_DIR"].startswith(f"{SHARED_MOUNT}/")
    assert not worker_env.get("DOCLANE_PATH_MAP"), "same paths need no path map"
    for name in DOCLANE_SERVICES:
        env = services[name]["environment"]
        assert env["DOCLANE_INBOX_DIR"] == worker_env["DOCLANE_INBOX_DIR"], name


def test_the_stdio_stanza_runs_without_a_docling_mcp_service(rendered: dict[str, Any]) -> None:
    stdio = rendered["services"]["worker-stdio"]
    assert "docling-mcp" not in _depends(stdio)
    assert stdio["environment"]["DOCLING_MCP_COMMAND"] == "docling-mcp-server --transport stdio"
    assert stdio["build"]["target"] == "worker-stdio"


def test_the_rs_stanza_sends_its_servers_token_to_its_server(rendered: dict[str, Any]) -> None:
    services = rendered["services"]
    worker, server = services["worker-rs"], services["docling-rs-mcp"]
    assert _depends(worker).get("docling-rs-mcp") == "service_healthy"
    assert "docling-mcp" not in _depends(worker)
    env = worker["environment"]
    assert env["DOCLING_MCP_ORIGIN"] == "http://docling-rs-mcp:3001"
    assert env["DOCLING_MCP_AUTH"] == "bearer"
    assert env["DOCLING_MCP_TOKEN"] == server["environment"]["DOCLING_RS_MCP_TOKEN"]
    command = server["command"]
    assert command[command.index("--root") + 1] == SHARED_MOUNT  # it reads the shared folder
    roots = [Path(command[n + 1]) for n, word in enumerate(command[:-1]) if word == "--root"]
    for name in ("worker-rs", "api"):  # where workers fetch and the API's uploads land
        inbox = Path(services[name]["environment"]["DOCLANE_INBOX_DIR"])
        assert any(inbox.is_relative_to(root) for root in roots), (name, inbox, roots)
    assert _volume_targets(server)[SHARED_MOUNT] == _volume_targets(worker)[SHARED_MOUNT]
    assert not server.get("ports"), "reachable on the compose network only"


def test_build_contexts_dockerfiles_and_targets_exist() -> None:
    import yaml

    raw = yaml.safe_load((ROOT / "compose.yaml").read_text())
    builds = [s["build"] for s in raw["services"].values() if "build" in s]
    assert len(builds) >= 3
    for build in builds:
        context = (ROOT / build["context"]).resolve()
        assert context.is_dir(), build
        dockerfile = context / build["dockerfile"]
        assert dockerfile.is_file(), build
        if "target" in build:
            stages = re.findall(r"^FROM\s+\S+\s+AS\s+(\S+)", dockerfile.read_text(), re.M | re.I)
            assert build["target"] in stages, build
