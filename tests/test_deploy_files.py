"""The operations kit (Dockerfile, deploy/) stays consistent with the gateway.

Nothing here runs Docker, Kubernetes or Prometheus: the files are parsed and
checked against the gateway's own code, above all that every metric the
alerts and the dashboard query is one the gateway really exports.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio
import yaml
from prometheus_client import CollectorRegistry, generate_latest

from gateway.config import ShutdownConfig, parse
from gateway.telemetry import metrics as observability
from gateway.telemetry.metrics import Metrics
from tests.harness import gateway_config, open_client, sdk_backend, start_gateway

ROOT = Path(__file__).resolve().parents[1]
DEPLOY = ROOT / "deploy"
KUBERNETES = DEPLOY / "kubernetes"
VALKEY = KUBERNETES / "valkey.yaml"
KUBERNETES_VERSION = "1.33.0"
ALERTS = DEPLOY / "prometheus" / "alerts.yaml"
DASHBOARD = DEPLOY / "grafana" / "mcp-gateway.json"
CONFIG_PATH = "/etc/mcp-gateway/gateway.yaml"

# A metric name in PromQL: an identifier with the gateway's prefix.
METRIC_NAME = re.compile(r"(?<![A-Za-z0-9_:])mcp_gateway_[A-Za-z0-9_:]*")
# ${NAME} without a default (an unset one is a config error); "$${" is a literal.
REQUIRED_VAR = re.compile(r"(?<!\$)\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
ANY_VAR = re.compile(r"(?<!\$)\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-[^}]*)?\}")
SUFFIXES = {
    "counter": ("_total", "_created"),
    "histogram": ("_bucket", "_sum", "_count", "_created"),
    "summary": ("", "_sum", "_count", "_created"),
    "gauge": ("",),
    "info": ("_info",),
    "stateset": ("",),
    "gaugehistogram": ("_bucket", "_gsum", "_gcount"),
    "unknown": ("",),
}


def _yaml_files() -> list[Path]:
    # A Helm chart's templates are Go templates, not YAML: tests/test_helm_chart.py
    # renders them with Helm and validates what comes out.
    return sorted(
        p
        for p in DEPLOY.rglob("*")
        if p.suffix in (".yaml", ".yml") and "templates" not in p.relative_to(DEPLOY).parts
    )


def _documents(path: Path) -> list[Any]:
    with path.open(encoding="utf-8") as f:
        return [doc for doc in yaml.safe_load_all(f) if doc is not None]


def _kube(kind: str) -> dict[str, Any]:
    """The one Kubernetes object of ``kind`` of the gateway under deploy/kubernetes/."""
    found = [
        doc
        for path in sorted(KUBERNETES.glob("*.yaml"))
        if path != VALKEY
        for doc in _documents(path)
        if doc.get("kind") == kind
    ]
    assert len(found) == 1, f"expected one {kind}, found {len(found)}"
    return found[0]


def _container() -> dict[str, Any]:
    containers = _kube("Deployment")["spec"]["template"]["spec"]["containers"]
    assert len(containers) == 1
    return containers[0]


def _configmap_text() -> str:
    return _kube("ConfigMap")["data"]["gateway.yaml"]


def _exported_metric_names() -> set[str]:
    """Every series name the gateway's /metrics can show (the metrics object alone)."""
    registry = CollectorRegistry()
    metrics = Metrics(registry)
    # Per-backend families read at scrape time, registered by app.py.
    watch = getattr(metrics, "watch_backends", None)
    if watch is not None:
        watch(lambda: [observability.BackendSample("demo", "up", 0, 0, 1)])
    return _names_in(generate_latest(registry).decode(), registry)


async def _served_metric_names(nursery: trio.Nursery) -> set[str]:
    """Every series name a real gateway's /metrics shows after one call through it.

    What ``app.py`` registers beside ``Metrics`` (the backend and task
    collectors) is only there in a served gateway, so this is the list the
    dashboard is checked against.
    """
    running = await start_gateway(nursery, gateway_config([sdk_backend("alpha")]))
    async with open_client(running.url) as session:
        await session.call_tool("alpha__echo", {"text": "hi"})
    async with httpx.AsyncClient(base_url=running.base_url, trust_env=False) as client:
        scraped = await client.get("/metrics")
    assert scraped.status_code == 200
    return _names_in(scraped.text, running.gateway.metrics.registry)


def _names_in(exposition: str, registry: CollectorRegistry) -> set[str]:
    """The series names of an exposition, and those its families may show later."""
    names: set[str] = set()
    for line in exposition.splitlines():
        if line.startswith("# TYPE "):
            names.add(line.split()[2])
        elif line and not line.startswith("#"):
            names.add(re.split(r"[{ ]", line, maxsplit=1)[0])
    # Labelled metrics without samples yet show only HELP/TYPE, and a
    # counter's TYPE line names the family without _total: add the series
    # names each family has.
    for family in registry.collect():
        for suffix in SUFFIXES[family.type]:
            names.add(family.name + suffix)
    return names


def _alert_expressions() -> list[str]:
    (doc,) = _documents(ALERTS)
    return [rule["expr"] for group in doc["groups"] for rule in group["rules"]]


def _dashboard_expressions() -> list[str]:
    dashboard = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    exprs = [
        target["expr"]
        for panel in dashboard["panels"]
        if panel["type"] != "row"
        for target in panel["targets"]
    ]
    for variable in dashboard["templating"]["list"]:
        query = variable.get("query")
        exprs.append(query["query"] if isinstance(query, dict) else query)
    return exprs


def _dockerfile() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of the Dockerfile, continuation lines joined."""
    text = (ROOT / "Dockerfile").read_text(encoding="utf-8")
    text = re.sub(r"\\\n", " ", text)
    instructions = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            instructions.append((word.upper(), rest.strip()))
    return instructions


# --------------------------------------------------------------------------
# Every file parses


def test_deploy_has_the_kit() -> None:
    for relative in (
        "kubernetes/configmap.yaml",
        "kubernetes/secret.yaml",
        "kubernetes/deployment.yaml",
        "kubernetes/service.yaml",
        "kubernetes/servicemonitor.yaml",
        "kubernetes/ingress-nginx.yaml",
        "kubernetes/valkey.yaml",
        "systemd/mcp-gateway.service",
        "prometheus/alerts.yaml",
        "grafana/mcp-gateway.json",
        "README.md",
    ):
        assert (DEPLOY / relative).is_file(), relative


@pytest.mark.parametrize("path", _yaml_files(), ids=lambda p: str(p.relative_to(DEPLOY)))
def test_yaml_parses(path: Path) -> None:
    docs = _documents(path)
    assert docs, f"{path} holds no document"
    if path.parent == KUBERNETES:
        for doc in docs:
            assert {"apiVersion", "kind", "metadata"} <= doc.keys()
            expected = "mcp-gateway-valkey" if path == VALKEY else "mcp-gateway"
            assert doc["metadata"]["name"] == expected


def test_dashboard_parses() -> None:
    dashboard = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    assert dashboard["schemaVersion"] >= 36
    assert [i["name"] for i in dashboard["__inputs"]] == ["DS_PROMETHEUS"]
    ids = [panel["id"] for panel in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    for panel in dashboard["panels"]:
        if panel["type"] != "row":
            assert panel["datasource"]["uid"] == "${DS_PROMETHEUS}", panel["title"]
            assert panel["targets"], panel["title"]


# --------------------------------------------------------------------------
# Kubernetes


def test_probes_point_at_health_endpoints() -> None:
    container = _container()
    port_names = {p["name"] for p in container["ports"]}
    readiness = container["readinessProbe"]["httpGet"]
    liveness = container["livenessProbe"]["httpGet"]
    assert readiness["path"] == "/readyz"
    assert liveness["path"] == "/healthz"
    assert {readiness["port"], liveness["port"]} <= port_names


def test_grace_period_exceeds_the_drain_timeout() -> None:
    pod = _kube("Deployment")["spec"]["template"]["spec"]
    drain = ShutdownConfig().drain_timeout
    assert pod["terminationGracePeriodSeconds"] > drain
    # The ConfigMap may set its own drain timeout: the grace period must cover it too.
    config = _parsed_configmap()
    assert pod["terminationGracePeriodSeconds"] > config.shutdown.drain_timeout


def test_deployment_runs_as_non_root_with_a_read_only_root() -> None:
    pod = _kube("Deployment")["spec"]["template"]["spec"]
    container = _container()
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] != 0
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    assert _kube("Deployment")["spec"]["replicas"] >= 2


def _parsed_configmap() -> Any:
    text = _configmap_text()
    # Variables without a default must come from the environment (the
    # Secret); stand in for them. Those with a default need nothing.
    env = {name: f"test-{name.lower()}" for name in REQUIRED_VAR.findall(text)}
    return parse(text, env=env, source="configmap.yaml")


def test_configmap_config_is_valid() -> None:
    config = _parsed_configmap()
    container = _container()
    assert container["ports"][0]["containerPort"] == config.server.port
    assert config.pagination.cursor_secret, "replicas need one shared cursor secret"
    assert {b.name for b in config.backends} >= {"notes", "toolbox"}


def test_secret_provides_every_variable_the_config_uses() -> None:
    secret = _kube("Secret")
    names = set(ANY_VAR.findall(_configmap_text()))
    assert "MCP_GATEWAY_CURSOR_SECRET" in names
    assert names <= set(secret["stringData"])
    refs = {e["secretRef"]["name"] for e in _container()["envFrom"]}
    assert secret["metadata"]["name"] in refs


def test_deployment_mounts_the_configmap_where_the_command_reads_it() -> None:
    pod = _kube("Deployment")["spec"]["template"]["spec"]
    container = _container()
    volumes = {v["name"]: v for v in pod["volumes"]}
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    config_volume = volumes[mounts[str(Path(CONFIG_PATH).parent)]]
    assert config_volume["configMap"]["name"] == _kube("ConfigMap")["metadata"]["name"]
    args = container["args"]
    assert args[args.index("-c") + 1] == CONFIG_PATH


def test_service_and_monitor_select_the_pods() -> None:
    deployment = _kube("Deployment")
    service = _kube("Service")
    monitor = _kube("ServiceMonitor")
    pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= pod_labels.items()
    assert service["spec"]["sessionAffinity"] == "ClientIP"
    assert (
        monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    )
    port_names = {p["name"] for p in service["spec"]["ports"]}
    (endpoint,) = monitor["spec"]["endpoints"]
    assert endpoint["port"] in port_names
    assert endpoint["path"] == "/metrics"


def test_the_valkey_manifest_is_valid_against_the_kubernetes_schemas() -> None:
    """Issue 26: the plain-manifest store, strictly valid for Kubernetes 1.33, as the chart's."""
    import kubernetes_validate  # the chart extra, part of dev

    documents = _documents(VALKEY)
    assert sorted(doc["kind"] for doc in documents) == ["Service", "StatefulSet"]
    for document in documents:
        kubernetes_validate.validate(document, KUBERNETES_VERSION, strict=True)
    broken = {**documents[1], "spec": {**documents[1]["spec"], "replica": 1}}
    with pytest.raises(kubernetes_validate.ValidationError):  # the check can fail
        kubernetes_validate.validate(broken, KUBERNETES_VERSION, strict=True)


def test_the_valkey_store_keeps_its_data_and_is_not_one_of_the_gateways_pods() -> None:
    """Issue 26: an append-only file on a volume; no gateway selector picks its pod."""
    service, statefulset = sorted(_documents(VALKEY), key=lambda doc: doc["kind"])
    pod = statefulset["spec"]["template"]
    labels = pod["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= labels.items()
    assert statefulset["spec"]["selector"]["matchLabels"].items() <= labels.items()
    (container,) = pod["spec"]["containers"]
    assert container["args"][container["args"].index("--appendonly") + 1] == "yes"
    (mount,) = container["volumeMounts"]
    assert container["args"][container["args"].index("--dir") + 1] == mount["mountPath"]
    assert [claim["metadata"]["name"] for claim in statefulset["spec"]["volumeClaimTemplates"]] == [
        mount["name"]
    ]
    for selector in (
        _kube("Deployment")["spec"]["selector"]["matchLabels"],
        _kube("PodDisruptionBudget")["spec"]["selector"]["matchLabels"],
        _kube("Service")["spec"]["selector"],
    ):
        assert not selector.items() <= labels.items(), selector
    assert not _kube("ServiceMonitor")["spec"]["selector"]["matchLabels"].items() <= (
        service["metadata"]["labels"].items()
    )
    # The address both files tell the gateway's config to use.
    url = f"redis://{service['metadata']['name']}:{service['spec']['ports'][0]['port']}/0"
    assert url in VALKEY.read_text()
    assert f"#   url: {url}" in _configmap_text()


# --------------------------------------------------------------------------
# Metrics: alerts and dashboard use only what the gateway exports


def test_exposition_is_built_from_the_gateway() -> None:
    names = _exported_metric_names()
    assert "mcp_gateway_requests_total" in names
    assert "mcp_gateway_request_duration_seconds_bucket" in names
    assert "mcp_gateway_requests" not in names  # a family name, not a series


def test_alert_metrics_are_exported() -> None:
    exported = _exported_metric_names()
    used = {name for expr in _alert_expressions() for name in METRIC_NAME.findall(expr)}
    assert used >= {
        "mcp_gateway_backend_up",
        "mcp_gateway_requests_total",
        "mcp_gateway_request_duration_seconds_bucket",
        "mcp_gateway_backend_restarts_total",
        "mcp_gateway_config_reloads_total",
    }
    assert used - exported == set()


async def test_dashboard_metrics_are_exported(nursery: trio.Nursery) -> None:
    """Issue 18 item 4: every metric a panel queries is one a served gateway exports."""
    exported = await _served_metric_names(nursery)
    exprs = _dashboard_expressions()
    used = {name for expr in exprs for name in METRIC_NAME.findall(expr)}
    assert len(used) >= 9
    # The panels of issue 18 item 4: eras, profiles, search, MRTR, auth, tasks.
    assert used >= {
        "mcp_gateway_client_requests_by_era_total",
        "mcp_gateway_client_sessions_by_era_total",
        "mcp_gateway_backend_requests_by_era_total",
        "mcp_gateway_backend_era",
        "mcp_gateway_backend_sessions_by_era_total",
        "mcp_gateway_profile_sessions_open",
        "mcp_gateway_tool_search_calls_total",
        "mcp_gateway_tool_search_hits_total",
        "mcp_gateway_mrtr_input_required_total",
        "mcp_gateway_mrtr_retries_total",
        "mcp_gateway_mrtr_rejections_total",
        "mcp_gateway_auth_decisions_total",
        "mcp_gateway_token_validation_failures_total",
        "mcp_gateway_policy_denials_total",
        "mcp_gateway_backend_token_requests_total",
        "mcp_gateway_tasks_created_total",
        "mcp_gateway_tasks_running",
        "mcp_gateway_tasks_ended_total",
    }
    assert used - exported == set()
    for expr in exprs:
        assert METRIC_NAME.search(expr), f"no gateway metric in {expr!r}"


def test_metric_name_extraction() -> None:
    expr = (
        'sum(rate(mcp_gateway_requests_total{outcome!~"ok"}[5m])) / '
        "histogram_quantile(0.99, mcp_gateway_request_duration_seconds_bucket) "
        'and up{job=~".*mcp-gateway.*"} and not_mcp_gateway_x'
    )
    assert METRIC_NAME.findall(expr) == [
        "mcp_gateway_requests_total",
        "mcp_gateway_request_duration_seconds_bucket",
    ]


# --------------------------------------------------------------------------
# Dockerfile and systemd


def test_dockerfile_healthcheck_user_and_exec_form() -> None:
    instructions = _dockerfile()
    stages = [i for i, (word, _) in enumerate(instructions) if word == "FROM"]
    assert len(stages) >= 2, "multi-stage build"
    assert all(instructions[i][1].startswith("python:3.11-slim") for i in stages)
    final = instructions[stages[-1] :]
    words = [word for word, _ in final]
    users = [args for word, args in final if word == "USER"]
    assert users, "the final stage sets a USER"
    assert users[-1].split(":")[0] not in ("root", "0")
    (healthcheck,) = [args for word, args in final if word == "HEALTHCHECK"]
    assert "http://127.0.0.1:8000/healthz" in healthcheck
    assert "urllib" in healthcheck
    (entrypoint,) = [args for word, args in final if word == "ENTRYPOINT"]
    assert json.loads(entrypoint) == ["trio-mcp-gateway"]
    (cmd,) = [args for word, args in final if word == "CMD"]
    assert json.loads(cmd) == ["serve", "-c", CONFIG_PATH, "--host", "0.0.0.0"]
    assert "EXPOSE" in words and ("EXPOSE", "8000") in final
    assert ("COPY", f"config/gateway.yaml {CONFIG_PATH}") in final
    assert words.index("USER") < words.index("ENTRYPOINT")
    assert (ROOT / ".dockerignore").is_file()


def test_systemd_unit() -> None:
    settings: dict[str, list[str]] = {}
    for line in (DEPLOY / "systemd" / "mcp-gateway.service").read_text().splitlines():
        if "=" in line and not line.startswith(("#", ";", "[")):
            key, _, value = line.partition("=")
            settings.setdefault(key.strip(), []).append(value.strip())
    assert settings["Type"] == ["exec"]
    (start,) = settings["ExecStart"]
    assert start.split()[1:] == ["serve", "-c", CONFIG_PATH]
    assert settings["ExecReload"][-1] == "/bin/kill -HUP $MAINPID"
    assert settings["KillSignal"] == ["SIGTERM"]
    assert float(settings["TimeoutStopSec"][0]) > ShutdownConfig().drain_timeout
    assert settings["Restart"] == ["on-failure"]
    for key in ("NoNewPrivileges", "ProtectHome", "PrivateTmp"):
        assert settings[key] == ["yes"], key
    assert settings["ProtectSystem"] == ["strict"]
    assert "DynamicUser" in settings or "User" in settings
    assert "EnvironmentFile" in settings
