"""The Helm chart (deploy/helm/mcp-gateway) renders to valid Kubernetes objects (issue 19).

Rendered by Helm itself: ``helm-python-sdk`` binds Helm's official Go SDK
(``helm_python.helm_sdk_version()``; no cluster is contacted), since no
``helm`` binary is packaged for this OS. Validated offline by
``kubernetes-validate``, which ships the Kubernetes OpenAPI schemas, in
strict mode (an unknown field fails). The ServiceMonitor is a CRD of the
Prometheus Operator, outside those schemas: its shape is checked here. The
config the chart mounts is checked by the gateway's own loader, the
authority on it. ``make test`` installs both packages (the ``chart`` extra).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final

import helm_python
import kubernetes_validate
import pytest
import yaml
from helm_python.chart import Chart

from gateway import __version__
from gateway.config import parse

CHART: Final = Path(__file__).resolve().parents[1] / "deploy" / "helm" / "mcp-gateway"
KUBERNETES_VERSION: Final = "1.33.0"
SECRET: Final = {"envSecret": {"MCP_GATEWAY_CURSOR_SECRET": "0" * 64}}
EVERYTHING_ON: Final = {
    **SECRET,
    "replicaCount": 3,
    "serviceMonitor": {"enabled": True, "labels": {"release": "kube-prometheus-stack"}},
    "secretFiles": {"ca.pem": "-----BEGIN CERTIFICATE-----\n"},
    "env": {"LOG_COLOR": "0"},
    "imagePullSecrets": [{"name": "registry"}],
    "nodeSelector": {"kubernetes.io/os": "linux"},
}


def render(values: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    """The chart's objects with these values, by (kind, name)."""
    manifests = Chart.load(CHART).render(values=values, name="prod")
    objects: dict[tuple[str, str], dict[str, Any]] = {}
    for name, text in manifests.items():
        if name.endswith("NOTES.txt"):
            continue
        for document in yaml.safe_load_all(text):
            if document:
                objects[(document["kind"], document["metadata"]["name"])] = document
    return objects


def test_the_chart_is_rendered_by_helms_own_engine_and_passes_helm_lint() -> None:
    """Issue 19: a real Helm, not a look-alike renderer."""
    assert helm_python.helm_sdk_version().startswith("v4.")
    report = helm_python.lint(str(CHART), values=SECRET, strict=True)
    assert report["total_charts_linted"] == 1
    assert report["errors"] == []
    # Severity 2 is a warning, 3 an error; 1 is advice ("icon is recommended").
    assert [m for m in report["messages"] if m["severity"] >= 2] == []


@pytest.mark.parametrize("values", [SECRET, EVERYTHING_ON], ids=["defaults", "everything-on"])
def test_every_rendered_object_is_valid_against_the_kubernetes_schemas(
    values: dict[str, Any],
) -> None:
    """Issue 19: validated offline and strictly against Kubernetes' own schemas."""
    objects = render(values)
    for (kind, _name), document in objects.items():
        if kind == "ServiceMonitor":
            continue  # a CRD: checked below
        kubernetes_validate.validate(document, KUBERNETES_VERSION, strict=True)
    kinds = sorted(kind for kind, _ in objects)
    expected = ["ConfigMap", "Deployment", "PodDisruptionBudget", "Secret", "Service"]
    if values is EVERYTHING_ON:
        expected = sorted([*expected, "Secret", "ServiceMonitor"])
    assert kinds == expected


def test_a_broken_object_fails_the_validation() -> None:
    """The validation above can fail: a misspelt field is refused in strict mode."""
    deployment = render(SECRET)[("Deployment", "prod-mcp-gateway")]
    deployment["spec"]["replica"] = 2
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(deployment, KUBERNETES_VERSION, strict=True)


def test_the_pod_runs_non_root_on_a_read_only_root_filesystem_with_both_probes() -> None:
    """Issue 19: non-root, read-only root, /healthz liveness and /readyz readiness."""
    objects = render(EVERYTHING_ON)
    deployment = objects[("Deployment", "prod-mcp-gateway")]
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert deployment["spec"]["replicas"] == 3
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert container["image"] == f"mcp-gateway:{__version__}"
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    assert mounts == {
        "config": "/etc/mcp-gateway",
        "secret-files": "/etc/mcp-gateway-secrets",
        "tmp": "/tmp",
    }
    files = objects[("Secret", "prod-mcp-gateway-files")]
    assert files["stringData"] == {"ca.pem": "-----BEGIN CERTIFICATE-----\n"}
    monitor = objects[("ServiceMonitor", "prod-mcp-gateway")]
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    assert monitor["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    assert monitor["spec"]["endpoints"] == [
        {"port": "http", "path": "/metrics", "interval": "30s", "scrapeTimeout": "10s"}
    ]
    service = objects[("Service", "prod-mcp-gateway")]
    assert monitor["spec"]["selector"]["matchLabels"] == service["spec"]["selector"]
    pdb = objects[("PodDisruptionBudget", "prod-mcp-gateway")]
    assert pdb["spec"]["selector"]["matchLabels"] == service["spec"]["selector"]


def test_the_mounted_config_is_one_the_gateway_accepts() -> None:
    """Issue 19: the gateway's loader, not the chart, is the authority on its config."""
    configmap = render(SECRET)[("ConfigMap", "prod-mcp-gateway")]
    config = parse(configmap["data"]["gateway.yaml"], env={"MCP_GATEWAY_CURSOR_SECRET": "s"})
    assert [b.name for b in config.backends] == ["notes", "toolbox"]
    assert config.server.host == "0.0.0.0"


def test_the_valkey_store_is_a_statefulset_with_a_volume_and_the_config_points_at_it() -> None:
    """Issue 26: replicas share one store; the chart can bring it, off by default."""
    assert not [key for key in render(SECRET) if "valkey" in key[1]]
    objects = render({**SECRET, "valkey": {"enabled": True}})
    statefulset = objects[("StatefulSet", "prod-mcp-gateway-valkey")]
    [claim] = statefulset["spec"]["volumeClaimTemplates"]
    assert claim["spec"]["resources"]["requests"]["storage"] == "1Gi"
    [container] = statefulset["spec"]["template"]["spec"]["containers"]
    assert "--appendonly" in container["args"]
    assert objects[("Service", "prod-mcp-gateway-valkey")]["spec"]["clusterIP"] == "None"
    configmap = objects[("ConfigMap", "prod-mcp-gateway")]
    config = parse(configmap["data"]["gateway.yaml"], env={"MCP_GATEWAY_CURSOR_SECRET": "s"})
    assert config.store.url == "redis://prod-mcp-gateway-valkey:6379/0"
    for document in objects.values():
        if document["kind"] != "ServiceMonitor":
            kubernetes_validate.validate(document, KUBERNETES_VERSION, strict=True)
    # A store the operator configured is kept.
    own = {"config": {**yaml.safe_load((CHART / "values.yaml").read_text())["config"]}}
    own["config"]["store"] = {"url": "rediss://valkey.example:6380/1"}
    configmap = render({**SECRET, **own, "valkey": {"enabled": True}})[
        ("ConfigMap", "prod-mcp-gateway")
    ]
    kept = parse(configmap["data"]["gateway.yaml"], env={"MCP_GATEWAY_CURSOR_SECRET": "s"})
    assert kept.store.url == "rediss://valkey.example:6380/1"


def test_an_empty_secret_value_fails_rendering_with_its_name() -> None:
    """Issue 19: installing without the cursor secret is refused, saying which value to set."""
    with pytest.raises(
        helm_python.HelmError, match=r"envSecret\.MCP_GATEWAY_CURSOR_SECRET is empty"
    ):
        render({})


def test_existing_config_map_and_secrets_replace_the_charts_own() -> None:
    """Issue 19: secrets and config managed elsewhere (sealed secrets, GitOps) are referenced."""
    objects = render(
        {
            "existingConfigMap": "my-config",
            "existingEnvSecret": "my-env",
            "existingSecretFiles": "my-files",
            "envSecret": {},
        }
    )
    assert sorted(kind for kind, _ in objects) == ["Deployment", "PodDisruptionBudget", "Service"]
    pod = objects[("Deployment", "prod-mcp-gateway")]["spec"]["template"]["spec"]
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["config"]["configMap"]["name"] == "my-config"
    assert volumes["secret-files"]["secret"]["secretName"] == "my-files"
    assert pod["containers"][0]["envFrom"] == [{"secretRef": {"name": "my-env"}}]


@pytest.mark.parametrize(
    ("values", "problem"),
    [
        ({"replicas": 3}, "additional properties 'replicas' not allowed"),
        ({"replicaCount": "two"}, "at '/replicaCount': got string, want integer"),
        ({"serviceMonitor": {"enable": True}}, "additional properties 'enable' not allowed"),
        ({"secretFilesPath": "secrets"}, "at '/secretFilesPath'"),
    ],
)
def test_helm_refuses_values_the_chart_does_not_know(values: dict[str, Any], problem: str) -> None:
    """Issue 19: values.schema.json makes a misspelt value fail at install, not in the cluster."""
    with pytest.raises(helm_python.HelmValuesError) as caught:
        render({**SECRET, **values})
    assert problem in str(caught.value)
