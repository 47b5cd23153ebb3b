"""What a platform team sets on the chart: metrics ports (on by default) and a ServiceMonitor,
the log format, the operator's OpenTelemetry environment, extra arguments, pod annotations and
the peering lifetime. Each combination renders, and every object it renders is accepted by a
real API server (``kubectl apply --dry-run=server``)."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.operator.test_chart import _render, _template_error, helm  # noqa: F401 - a fixture
from tests.operator.test_chart_values import _by_kind, _containers, _env, _named
from tests.operator.test_workflowrun import CRDS

WORKERS = "workers[0].apps={myapp.flows}"

# prometheus-operator's CRD, reduced to its names: the API server then knows the kind (its
# schema, which this does not carry, is prometheus-operator's to check).
SERVICE_MONITOR_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "servicemonitors.monitoring.coreos.com"},
    "spec": {
        "group": "monitoring.coreos.com",
        "names": {
            "kind": "ServiceMonitor",
            "plural": "servicemonitors",
            "singular": "servicemonitor",
        },
        "scope": "Namespaced",
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "x-kubernetes-preserve-unknown-fields": True,
                    }
                },
            }
        ],
    },
}

EVERYTHING = (
    WORKERS,
    "logFormat=json",
    "operator.replicas=2",
    "operator.peeringLifetimeSeconds=7",
    "operator.env.OTEL_EXPORTER_OTLP_ENDPOINT=http://collector:4318",
    "operator.env.OTEL_SERVICE_NAME=wayline-operator",
    "operator.extraArgs={--verbose}",
    "operator.podAnnotations.team=platform",
    "workers[0].podAnnotations.team=orders",
    "workers[0].extraArgs={--log-level=DEBUG}",
    "workers[1].name=quiet",
    "workers[1].apps={myapp.other}",
    "workers[1].metricsPort=0",
    "serviceMonitor.enabled=true",
    "serviceMonitor.labels.release=prometheus",
)


def _dry_run(control_plane: Any, tmp_path: Path, docs: list[dict[str, Any]], ns: str) -> None:
    objects = [d for d in docs if d["kind"] not in ("CustomResourceDefinition", "List")]
    rendered = tmp_path / "rendered.json"
    rendered.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}))
    dry = control_plane.kubectl("apply", "--dry-run=server", "-f", str(rendered))
    assert dry.returncode == 0, dry.stderr
    assert dry.stdout.count("(server dry run)") == len(objects), dry.stdout


@pytest.mark.parametrize("combination", ["default", "everything"])
def test_the_observability_values_render_and_pass_the_api_servers_dry_run(
    helm: Path,  # noqa: F811
    control_plane: Any,
    tmp_path: Path,
    combination: str,
) -> None:
    values = (WORKERS,) if combination == "default" else EVERYTHING
    namespace = f"o-{uuid.uuid4().hex[:10]}"
    assert control_plane.kubectl("create", "namespace", namespace).returncode == 0
    for crds in (str(CRDS), "-"):
        made = control_plane.kubectl(
            "apply", "-f", crds, input=json.dumps(SERVICE_MONITOR_CRD) if crds == "-" else None
        )
        assert made.returncode == 0, made.stderr
    docs = _render(helm, namespace, *values)
    _dry_run(control_plane, tmp_path, docs, namespace)
    containers = dict(_containers(docs))
    operator = containers["t1-wayline-operator"]
    worker = containers["t1-wayline-worker-default"]
    ports = {c["name"]: c for c in (*operator["ports"], *worker["ports"])}
    # Metrics are on by default, on a named port the NetworkPolicies admit.
    assert "--metrics-port=9090" in operator["args"] and "--metrics-port=9090" in worker["args"]
    assert ports["metrics"]["containerPort"] == 9090
    for policy in ("-operator", "-workers"):
        admitted = _named(docs, "NetworkPolicy", policy)["spec"]["ingress"][0]["ports"]
        assert {"port": "metrics", "protocol": "TCP"} in admitted
    if combination == "default":
        assert "--log-format=text" in operator["args"] and "--log-format=text" in worker["args"]
        assert not _by_kind(docs, "ServiceMonitor")
        return
    assert "--log-format=json" in operator["args"] and "--log-format=json" in worker["args"]
    assert "--peering-lifetime=7" in operator["args"] and "--verbose" in operator["args"]
    assert "--log-level=DEBUG" in worker["args"]
    env = _env(operator)
    assert env["OTEL_EXPORTER_OTLP_ENDPOINT"]["value"] == "http://collector:4318"
    assert env["OTEL_SERVICE_NAME"]["value"] == "wayline-operator"
    pods = {d["metadata"]["name"]: d["spec"]["template"] for d in _by_kind(docs, "Deployment")}
    assert pods["t1-wayline-operator"]["metadata"]["annotations"] == {"team": "platform"}
    assert pods["t1-wayline-worker-default"]["metadata"]["annotations"] == {"team": "orders"}
    quiet = containers["t1-wayline-worker-quiet"]
    assert not any(a.startswith("--metrics-port") for a in quiet["args"])
    assert all(p["name"] != "metrics" for p in quiet["ports"])
    # The ServiceMonitor scrapes a metrics Service for each component that serves metrics.
    [monitor] = _by_kind(docs, "ServiceMonitor")
    assert monitor["metadata"]["labels"]["release"] == "prometheus"
    assert monitor["spec"]["endpoints"][0]["port"] == "metrics"
    selected = monitor["spec"]["selector"]["matchLabels"]
    services = {
        s["metadata"]["name"]: s
        for s in _by_kind(docs, "Service")
        if selected.items() <= s["metadata"]["labels"].items()
    }
    assert set(services) == {"t1-wayline-operator-metrics", "t1-wayline-worker-default-metrics"}
    for service in services.values():
        assert service["spec"]["ports"] == [
            {"name": "metrics", "port": 9090, "targetPort": "metrics"}
        ]


def test_the_values_refuse_a_short_peering_lifetime_and_an_unknown_log_format(
    helm: Path,  # noqa: F811
) -> None:
    for good, bad in (
        ("operator.peeringLifetimeSeconds=5", "operator.peeringLifetimeSeconds=4"),
        ("logFormat=json", "logFormat=yaml"),
        ("workers[0].metricsPort=0", "workers[0].metricsPort=-1"),
    ):
        assert _render(helm, "ns1", WORKERS, good)  # the edge of what is admitted renders
        error = _template_error(helm, "--set", WORKERS, "--set", bad)
        assert "values don't meet the specifications of the schema" in error, error
        assert bad.split("=")[0].split(".")[-1].replace("[0]", "") in error, (bad, error)
