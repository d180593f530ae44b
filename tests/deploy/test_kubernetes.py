"""deploy/kubernetes: what `kubectl kustomize` renders, validated offline and held to the rules
an operator of a worker fleet relies on.

There is no cluster on these machines. Everything a cluster would refuse before running anything
is checked here instead: kubectl's own kustomize renders every overlay, kubernetes-validate
checks each object strictly against Kubernetes' published schemas (one pinned version), and the
KEDA objects against the field names of KEDA's ScaledObject CRD (written below: no package
carries that schema in a form that refuses unknown fields). The rest are the invariants
docs/operations.md promises.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from tests.support.deploy_tools import run_tool

ROOT = Path(__file__).resolve().parents[2]
KUBERNETES = ROOT / "deploy" / "kubernetes"
#: The Kubernetes release the manifests are validated against (and docs/operations.md names).
KUBERNETES_VERSION = "1.33.0"
#: The overlays, one per conversion server, and the tree's default (docling-rs-mcp).
TREES = {
    "default": KUBERNETES,
    "docling-rs-mcp": KUBERNETES / "overlays" / "docling-rs-mcp",
    "docling-mcp": KUBERNETES / "overlays" / "docling-mcp",
}
#: The largest MCP call deadline (DOCLANE_TIMEOUT_LARGE_S): a warm shutdown must outlast it.
LARGEST_CALL_DEADLINE_S = 300
WORKLOADS = ("Deployment", "StatefulSet", "Job", "DaemonSet")


def kustomize(tree: Path) -> list[dict[str, Any]]:
    result = run_tool("kubectl", "kustomize", str(tree), cwd=ROOT)
    assert result.returncode == 0, result.stderr
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc]


@pytest.fixture(scope="module", params=sorted(TREES))
def rendered(request: pytest.FixtureRequest) -> list[dict[str, Any]]:
    return kustomize(TREES[request.param])


def of_kind(objects: list[dict[str, Any]], *kinds: str) -> list[dict[str, Any]]:
    return [o for o in objects if o["kind"] in kinds]


def named(objects: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    (found,) = [o for o in of_kind(objects, kind) if o["metadata"]["name"] == name]
    return found


def pod_spec(workload: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = workload["spec"]["template"]["spec"]
    return spec


def containers(workload: dict[str, Any]) -> Iterator[dict[str, Any]]:
    spec = pod_spec(workload)
    yield from spec.get("initContainers", [])
    yield from spec["containers"]


def env_values(container: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield from container.get("env", [])


# ---- offline validation -------------------------------------------------------------------


def test_every_object_validates_strictly_against_the_kubernetes_schemas(
    rendered: list[dict[str, Any]],
) -> None:
    for obj in rendered:
        if obj["apiVersion"].startswith("keda.sh/"):
            continue  # not Kubernetes' own: checked against KEDA's types below
        kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)


def test_strict_validation_refuses_an_unknown_field(rendered: list[dict[str, Any]]) -> None:
    """The check above can fail: a misspelt field in a container is refused."""
    api = named(rendered, "Deployment", "doclane-api")
    broken = yaml.safe_load(yaml.safe_dump(api))
    broken["spec"]["template"]["spec"]["containers"][0]["readinesProbe"] = {}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, KUBERNETES_VERSION, strict=True)


#: ScaledObject's fields as KEDA 2.16's CRD (keda.sh_scaledobjects.yaml) defines them. No
#: package on PyPI or npm carries that schema in a form that refuses unknown fields (cloudcoil's
#: models and @kubernetes-models/keda both accept them), so the names are written here and
#: checked against every key the manifests use: a misspelt field would be silently ignored.
KEDA_SCALED_OBJECT_SPEC = {
    "advanced", "cooldownPeriod", "fallback", "idleReplicaCount", "initialCooldownPeriod",
    "maxReplicaCount", "minReplicaCount", "pollingInterval", "scaleTargetRef", "triggers",
}  # fmt: skip
KEDA_TRIGGER = {"authenticationRef", "metadata", "metricType", "name", "type", "useCachedMetrics"}
KEDA_ADVANCED = {
    "horizontalPodAutoscalerConfig",
    "restoreToOriginalReplicaCount",
    "scalingModifiers",
}
#: The Prometheus scaler's metadata (KEDA's docs, scalers/prometheus).
KEDA_PROMETHEUS_METADATA = {
    "serverAddress", "query", "threshold", "activationThreshold", "namespace", "queryParameters",
    "customHeaders", "ignoreNullValues", "unsafeSsl", "timeout",
}  # fmt: skip


def test_keda_objects_use_only_fields_keda_knows(rendered: list[dict[str, Any]]) -> None:
    scaled = of_kind(rendered, "ScaledObject")
    assert {s["metadata"]["name"] for s in scaled} == {"doclane-worker", "doclane-worker-large"}
    for obj in scaled:
        assert obj["apiVersion"] == "keda.sh/v1alpha1"
        spec = obj["spec"]
        assert set(spec) <= KEDA_SCALED_OBJECT_SPEC, set(spec) - KEDA_SCALED_OBJECT_SPEC
        assert set(spec.get("advanced", {})) <= KEDA_ADVANCED
        behavior = spec["advanced"]["horizontalPodAutoscalerConfig"]["behavior"]
        # The HPA behaviour inside is Kubernetes' own type: validated by its schema.
        hpa = {
            "apiVersion": "autoscaling/v2",
            "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": "probe"},
            "spec": {
                "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "x"},
                "maxReplicas": spec["maxReplicaCount"],
                "behavior": behavior,
            },
        }
        kubernetes_validate.validate(hpa, KUBERNETES_VERSION, strict=True)
        for trigger in spec["triggers"]:
            assert set(trigger) <= KEDA_TRIGGER, set(trigger) - KEDA_TRIGGER
            assert set(trigger["metadata"]) <= KEDA_PROMETHEUS_METADATA
            # metadata is a map of strings in the CRD: a bare number is refused by the API.
            assert all(isinstance(v, str) for v in trigger["metadata"].values())


# ---- what the fleet is made of ------------------------------------------------------------


def test_the_fleet_has_its_deployments_and_the_server_of_its_overlay(
    request: pytest.FixtureRequest, rendered: list[dict[str, Any]]
) -> None:
    names = {d["metadata"]["name"] for d in of_kind(rendered, "Deployment")}
    server = {"docling-mcp": "docling-mcp"}.get(request.node.callspec.params["rendered"])
    assert names == {
        "doclane-api",
        "doclane-worker",
        "doclane-worker-large",
        "doclane-beat",
        server or "docling-rs-mcp",
    }
    config = named(rendered, "ConfigMap", "doclane-config")["data"]
    port = {"docling-mcp": 8000, "docling-rs-mcp": 3001}[server or "docling-rs-mcp"]
    assert config["DOCLING_MCP_ORIGIN"] == f"http://{server or 'docling-rs-mcp'}:{port}"
    service = named(rendered, "Service", server or "docling-rs-mcp")
    assert service["spec"]["ports"][0]["port"] == port


def test_every_doclane_pod_migrates_first(rendered: list[dict[str, Any]]) -> None:
    for deployment in of_kind(rendered, "Deployment"):
        if deployment["metadata"]["labels"].get("app.kubernetes.io/name") != "doclane":
            continue
        (init,) = pod_spec(deployment)["initContainers"]
        assert init["args"] == ["db", "migrate"], deployment["metadata"]["name"]


def test_workers_scale_on_queue_depth_with_bounds_and_a_cool_down(
    rendered: list[dict[str, Any]],
) -> None:
    targets = {}
    for scaled in of_kind(rendered, "ScaledObject"):
        spec = scaled["spec"]
        targets[spec["scaleTargetRef"]["name"]] = spec
        assert 0 <= spec["minReplicaCount"] < spec["maxReplicaCount"]
        assert spec["cooldownPeriod"] >= 60
        (trigger,) = spec["triggers"]
        assert trigger["type"] == "prometheus"
        # jobs, not messages: a message on the small queue stands for several
        assert "doclane_queue_backlog" in trigger["metadata"]["query"]
        assert float(trigger["metadata"]["threshold"]) > 0
    assert set(targets) == {"doclane-worker", "doclane-worker-large"}
    deployments = {d["metadata"]["name"] for d in of_kind(rendered, "Deployment")}
    assert set(targets) <= deployments


def test_every_container_has_requests_limits_and_a_locked_down_context(
    rendered: list[dict[str, Any]],
) -> None:
    for workload in of_kind(rendered, *WORKLOADS):
        name = workload["metadata"]["name"]
        assert pod_spec(workload)["securityContext"]["runAsNonRoot"] is True, name
        for container in containers(workload):
            where = f"{name}/{container['name']}"
            for kind in ("requests", "limits"):
                assert set(container["resources"][kind]) == {"cpu", "memory"}, where
            context = container["securityContext"]
            assert context["allowPrivilegeEscalation"] is False, where
            assert context["capabilities"]["drop"] == ["ALL"], where
            assert "privileged" not in context or context["privileged"] is False, where


def test_doclane_runs_on_a_read_only_root_filesystem(rendered: list[dict[str, Any]]) -> None:
    """Every container but docling-mcp's (Docling writes its caches under its home)."""
    for workload in of_kind(rendered, *WORKLOADS):
        for container in containers(workload):
            read_only = container["securityContext"]["readOnlyRootFilesystem"]
            assert read_only is (workload["metadata"]["name"] != "docling-mcp"), container["name"]


def test_every_image_has_a_pinned_tag(rendered: list[dict[str, Any]]) -> None:
    for workload in of_kind(rendered, *WORKLOADS):
        for container in containers(workload):
            image = container["image"]
            name, _, tag = image.rpartition(":")
            assert name and tag and tag != "latest" and "/" not in tag, image


def test_the_api_and_the_workers_have_readiness_and_liveness_probes(
    rendered: list[dict[str, Any]],
) -> None:
    api = named(rendered, "Deployment", "doclane-api")["spec"]["template"]["spec"]
    (container,) = api["containers"]
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    for name in ("doclane-worker", "doclane-worker-large"):
        (worker,) = pod_spec(named(rendered, "Deployment", name))["containers"]
        heartbeat = ["python", "-m", "workers.healthcheck", "worker"]
        assert worker["readinessProbe"]["exec"]["command"] == heartbeat
        assert worker["livenessProbe"]["exec"]["command"] == heartbeat
        # A probe that gives up before the health check's own timeout would kill a live worker.
        assert worker["livenessProbe"]["timeoutSeconds"] >= 10


def test_workers_and_servers_outlast_the_largest_call_deadline_on_shutdown(
    rendered: list[dict[str, Any]],
) -> None:
    for workload in of_kind(rendered, "Deployment"):
        component = workload["metadata"]["labels"]["app.kubernetes.io/component"]
        if component in ("worker", "worker-large", "server"):
            grace = pod_spec(workload)["terminationGracePeriodSeconds"]
            assert grace >= LARGEST_CALL_DEADLINE_S, workload["metadata"]["name"]


def test_the_workers_have_disruption_budgets(rendered: list[dict[str, Any]]) -> None:
    budgets = of_kind(rendered, "PodDisruptionBudget")
    covered = {b["spec"]["selector"]["matchLabels"]["app.kubernetes.io/component"] for b in budgets}
    assert {"worker", "worker-large"} <= covered
    for budget in budgets:
        assert "maxUnavailable" in budget["spec"] or "minAvailable" in budget["spec"]


def test_secrets_are_only_referenced_never_written(rendered: list[dict[str, Any]]) -> None:
    assert not of_kind(rendered, "Secret"), "a Secret's values would be in the repository"
    secret_names = ("URL", "TOKEN", "PASSWORD", "SECRET", "KEY")
    for workload in of_kind(rendered, *WORKLOADS):
        for container in containers(workload):
            for env in env_values(container):
                if any(part in env["name"] for part in secret_names):
                    assert "value" not in env, f"{env['name']} holds a value"
                    assert "secretKeyRef" in env["valueFrom"], env["name"]
    config = named(rendered, "ConfigMap", "doclane-config")["data"]
    for key, value in config.items():
        assert "@" not in value and "TOKEN" not in key and "PASSWORD" not in key, key


def test_the_shared_folder_is_one_read_write_many_claim(rendered: list[dict[str, Any]]) -> None:
    (claim,) = of_kind(rendered, "PersistentVolumeClaim")
    assert claim["spec"]["accessModes"] == ["ReadWriteMany"]
    for workload in of_kind(rendered, "Deployment"):
        volumes = {v["name"]: v for v in pod_spec(workload)["volumes"]}
        assert volumes["shared"]["persistentVolumeClaim"]["claimName"] == "doclane-shared"


def server_roots(args: list[str]) -> list[Path]:
    """The ``--root`` folders of a docling-rs-mcp command line."""
    return [Path(args[n + 1]) for n, word in enumerate(args[:-1]) if word == "--root"]


def test_docling_rs_mcp_reads_the_inbox_that_uploads_land_in(
    rendered: list[dict[str, Any]],
) -> None:
    deployments = of_kind(rendered, "Deployment")
    servers = [d for d in deployments if d["metadata"]["name"] == "docling-rs-mcp"]
    if not servers:  # the docling-mcp overlay: that server reads any path it is given
        return
    inbox = Path(named(rendered, "ConfigMap", "doclane-config")["data"]["DOCLANE_INBOX_DIR"])
    (server,) = pod_spec(servers[0])["containers"]
    roots = server_roots(server["args"])
    assert any(inbox.is_relative_to(root) for root in roots), (inbox, roots)
    mounts = {m["mountPath"] for m in server["volumeMounts"]}
    assert any(inbox.is_relative_to(mount) for mount in mounts), (inbox, mounts)
