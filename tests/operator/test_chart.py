"""The Helm chart: it lints and renders, every object it renders is accepted by a real API
server, and the operator's RBAC is enough: the operator runs under the chart's ServiceAccount
token (not as an administrator) and drives a WorkflowRun to the end."""

from __future__ import annotations

import json
import re
import subprocess
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml

import wayline
from tests.operator.conftest import _missing
from tests.operator.test_workflowrun import APPS, CRDS, Operator, _kubeconfig_env
from tests.runtime.harness import settings, wait_for
from wayline.worlds.local import LocalWorld
from wayline_operator.deployments import deployment
from wayline_operator.worker_resource import WorkflowWorkerSpec
from wayline_operator.worker_versions import version_of

CHART = Path(__file__).resolve().parents[2] / "charts" / "wayline"


@pytest.fixture(scope="module")
def helm(control_plane: Any) -> Path:
    path = Path(control_plane.bin_dir) / "helm"
    if not path.is_file():
        _missing(f"helm not in {control_plane.bin_dir}: run `make k8s-bins`")
    return path


def _render(helm: Path, namespace: str, *values: str) -> list[dict[str, Any]]:
    """The rendered documents; each WorkflowWorker is followed by the Deployment the operator
    makes of it (``deployments.deployment``, under the resource's own name, so a test finds a
    worker's pods as it did when the chart rendered Deployments)."""
    args = [str(helm), "template", "t1", str(CHART), "--namespace", namespace, "--include-crds"]
    for v in values:
        args += ["--set", v]
    done = subprocess.run(args, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    docs = [d for d in yaml.safe_load_all(done.stdout) if d]
    return [made for d in docs for made in (d, *_deployed(d))]


def _deployed(doc: dict[str, Any]) -> list[dict[str, Any]]:
    if doc["kind"] != "WorkflowWorker":
        return []
    spec = WorkflowWorkerSpec.model_validate(doc["spec"])  # what the operator accepts
    body = {"metadata": {**doc["metadata"], "uid": "uid-1"}}
    made = deployment(body, spec, version_of(spec), spec.minReplicas)
    made["metadata"]["name"] = doc["metadata"]["name"]
    made["metadata"]["labels"] = doc["metadata"]["labels"]
    return [made]


def test_the_chart_lints_and_carries_the_generated_crds(helm: Path) -> None:
    done = subprocess.run(
        [str(helm), "lint", str(CHART), "--set", "workers[0].apps={myapp.flows}"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    crds = sorted(p.name for p in CRDS.glob("*.json"))  # kopf-peering.json: operator.replicas > 1
    assert "kopf-peering.json" in crds
    assert sorted(p.name for p in (CHART / "crds").iterdir()) == crds
    for name in crds:
        assert (CHART / "crds" / name).read_text() == (CRDS / name).read_text(), name
    docs = _render(helm, "ns1", "workers[0].apps={myapp.flows}")
    kinds = sorted(d["kind"] for d in docs)
    assert kinds.count("CustomResourceDefinition") == 4  # runs, hooks, schedules, workers
    assert kinds.count("WorkflowWorker") == 1
    assert kinds.count("List") == 2  # kopf's peering CRDs; the run input's admission policy
    policy = next(d for d in docs if d["kind"] == "List" and "input" in json.dumps(d))
    # the run's input and spec fields, the hook's and the schedule's spec fields: a policy and
    # its binding each
    assert [(i["kind"], i["metadata"]["name"]) for i in policy["items"]] == [
        ("ValidatingAdmissionPolicy", "wayline-workflowrun-input"),
        ("ValidatingAdmissionPolicyBinding", "wayline-workflowrun-input"),
        ("ValidatingAdmissionPolicy", "wayline-workflowhook-fields"),
        ("ValidatingAdmissionPolicyBinding", "wayline-workflowhook-fields"),
        ("ValidatingAdmissionPolicy", "wayline-workflowschedule-fields"),
        ("ValidatingAdmissionPolicyBinding", "wayline-workflowschedule-fields"),
        ("ValidatingAdmissionPolicy", "wayline-workflowworker-fields"),
        ("ValidatingAdmissionPolicyBinding", "wayline-workflowworker-fields"),
    ]
    assert {"Deployment", "StatefulSet", "ClusterRole", "ServiceAccount"} <= set(kinds)
    worker = next(
        d for d in docs if d["kind"] == "Deployment" and "worker" in d["metadata"]["name"]
    )
    container = worker["spec"]["template"]["spec"]["containers"][0]
    assert container["command"] == ["wayline", "worker"] and container["args"] == [
        "--app=myapp.flows",
        "--processes=1",
        "--health-port=8081",
        "--health-host=$(POD_IP)",
        "--shutdown-grace=50",
        "--metrics-port=9090",
        "--log-format=text",
    ]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["WAYLINE_WORLD"] == (  # the generated credentials, as Kubernetes expands them
        "nats://$(NATS_USER):$(NATS_PASSWORD)@t1-wayline-nats.ns1.svc:4222?prefix=wayline&replicas=1"
    )


def _template_error(helm: Path, *args: str) -> str:
    done = subprocess.run(
        [str(helm), "template", "t1", str(CHART), *args], capture_output=True, text=True, timeout=60
    )
    assert done.returncode != 0, done.stdout[:2000]
    return done.stderr


def test_the_chart_refuses_an_installation_without_a_worker(helm: Path) -> None:
    for args in ([], ["--set-json", "workers=[]"], ["--set-json", 'workers=[{"apps": []}]']):
        error = _template_error(helm, *args)
        assert "no worker would run" in error and "workers[0].apps" in error, error


def test_the_values_schema_refuses_unknown_and_mistyped_values(helm: Path) -> None:
    ok = "workers[0].apps={myapp.flows}"
    assert "oprator" in _template_error(helm, "--set", ok, "--set", "oprator.enabled=false")
    assert "pullPolicy" in _template_error(helm, "--set", ok, "--set", "image.pullPolicy=Sometimes")
    assert "replicas" in _template_error(helm, "--set", ok, "--set", "workers[0].replicas=-1")


_COMPONENTS = ("Deployment", "StatefulSet", "Service", "PodDisruptionBudget")


def test_every_pod_is_locked_down_probed_and_budgeted(helm: Path) -> None:
    docs = _render(helm, "ns1", "workers[0].apps={a.flows}", "workers[1].apps={b.flows}")
    standard = {"name", "instance", "version", "part-of", "managed-by"}
    for doc in docs:
        if doc["kind"] in ("CustomResourceDefinition", "List"):
            continue
        labels = doc["metadata"].get("labels", {})
        have = {k.split("/", 1)[1] for k in labels if k.startswith("app.kubernetes.io/")}
        expected = standard | ({"component"} if doc["kind"] in _COMPONENTS else set())
        assert expected <= have, (doc["kind"], doc["metadata"]["name"], labels)
    workloads = [d for d in docs if d["kind"] in ("Deployment", "StatefulSet")]
    assert len(workloads) == 4  # operator, two workers, NATS
    budgets = {
        tuple(sorted(d["spec"]["selector"]["matchLabels"].items()))
        for d in docs
        if d["kind"] == "PodDisruptionBudget"
    }
    for w in workloads:
        pod = w["spec"]["template"]["spec"]
        component = w["metadata"]["labels"]["app.kubernetes.io/component"]
        assert pod["securityContext"]["runAsNonRoot"] is True, w["metadata"]["name"]
        assert pod["securityContext"]["runAsUser"] != 0
        for c in pod["containers"]:
            sc = c["securityContext"]
            assert sc["readOnlyRootFilesystem"] is True and sc["allowPrivilegeEscalation"] is False
            assert sc["capabilities"]["drop"] == ["ALL"]
            assert c["resources"]["requests"]["memory"] and c["resources"]["limits"]["memory"]
            assert "livenessProbe" in c, (w["metadata"]["name"], c["name"])
            if component != "operator":
                assert "readinessProbe" in c, (w["metadata"]["name"], c["name"])
        if component == "worker":
            assert pod["automountServiceAccountToken"] is False
            probe = pod["containers"][0]["readinessProbe"]["httpGet"]
            assert probe["path"] == "/readyz"
            assert "--health-host=$(POD_IP)" in pod["containers"][0]["args"]
        if component in ("worker", "nats"):
            # a budget selects the pods (of every version of a WorkflowWorker)
            labels = w["spec"]["template"]["metadata"]["labels"].items()
            budgeted = any(set(b) <= labels for b in budgets)
            assert budgeted, f"no PodDisruptionBudget for {w['metadata']['name']}"


def test_workers_render_as_workflow_workers_or_as_plain_deployments(helm: Path) -> None:
    """A WorkflowWorker by default; without the operator (or with workerResource Deployment)
    the Deployment of earlier releases, with the same pod; a KEDA ScaledObject only when
    asked for, scaling the WorkflowWorker on the operator's backlog metric."""
    worker = ("workers[0].apps={myapp.flows}", "workers[0].env.TIER=gold")
    [resource] = [d for d in _render(helm, "ns1", *worker) if d["kind"] == "WorkflowWorker"]
    assert resource["spec"]["env"] == {"TIER": "gold"}
    assert (resource["spec"]["minReplicas"], resource["spec"]["maxReplicas"]) == (1, 1)
    operated = _deployed(resource)[0]["spec"]["template"]
    for values in (("workerResource=Deployment",), ("operator.enabled=false",)):
        docs = _render(helm, "ns1", *worker, *values)
        assert not [d for d in docs if d["kind"] == "WorkflowWorker"]
        [plain] = [
            d
            for d in docs
            if d["kind"] == "Deployment" and d["metadata"]["name"] == "t1-wayline-worker-default"
        ]
        pod = plain["spec"]["template"]["spec"]["containers"][0]
        mine = operated["spec"]["containers"][0]
        assert pod["args"] == mine["args"] and pod["image"] == mine["image"]
        assert pod["env"] == [e for e in mine["env"] if e["name"] != "WAYLINE_WORKER_VERSION"]
    assert not [d for d in _render(helm, "ns1", *worker) if d["kind"] == "ScaledObject"]
    [scaled] = [
        d for d in _render(helm, "ns1", *worker, "keda.enabled=true") if d["kind"] == "ScaledObject"
    ]
    assert scaled["spec"]["scaleTargetRef"]["kind"] == "WorkflowWorker"
    query = scaled["spec"]["triggers"][0]["metadata"]["query"]
    assert (
        'wayline_operator_worker_backlog{namespace="ns1",worker="t1-wayline-worker-default"}'
        in query
    )


def helm_release(
    helm: Path, control_plane: Any, verb: str, release: str, namespace: str, *values: str
) -> None:
    """``helm install`` or ``upgrade`` of the chart on the control plane, for real (without
    its CRDs: the tests apply them), with each of ``values`` given to ``--set``."""
    done = subprocess.run(
        [
            *(str(helm), verb, f"--kubeconfig={control_plane.kubeconfig}", release),
            *(str(CHART), "--namespace", namespace, "--skip-crds"),
            *(a for v in values for a in ("--set", v)),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr


def notes(helm: Path, control_plane: Any, *values: str, release: str = "notes") -> str:
    """The chart's NOTES as ``helm install`` prints them (a client-side dry run), with each of
    ``values`` given to ``--set``. The default release is not t1: the RBAC test applies t1's
    ClusterRole for real."""
    # helm maps the (Cluster)KopfPeering it renders against the cluster's kinds
    crds = control_plane.kubectl("apply", "-f", str(CRDS))
    assert crds.returncode == 0, crds.stderr
    done = subprocess.run(
        [
            *(str(helm), "install", f"--kubeconfig={control_plane.kubeconfig}", release),
            *(str(CHART), "--dry-run=client", "--namespace", "ns1"),
            *(a for v in values for a in ("--set", v)),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.split("NOTES:", 1)[1]


def test_the_notes_say_how_to_start_a_run_and_approve_a_hook(
    helm: Path, control_plane: Any
) -> None:
    text = notes(helm, control_plane, "workers[0].apps={myapp.flows}", release="t1")
    assert "kind: WorkflowRun" in text and "kind: WorkflowHook" in text
    assert 'worker "default": 1 pod(s) serving myapp.flows' in text


def test_the_chart_refuses_a_missing_world(helm: Path) -> None:
    error = _template_error(helm, "--set", "nats.enabled=false", "--set", "workers[0].apps={a.b}")
    assert "set world.url" in error


_ACCESS = (
    "ServiceAccount",
    "ClusterRole",
    "ClusterRoleBinding",
    "Role",
    "RoleBinding",
    "KopfPeering",
    "ClusterKopfPeering",
)


@pytest.mark.parametrize("scope", ["cluster-wide", "namespaced-with-peering"])
async def test_the_operator_runs_under_the_charts_service_account(
    helm: Path, control_plane: Any, tmp_path: Path, scope: str
) -> None:
    """Cluster-wide: the ClusterRole. Namespaced with two replicas: a Role and a RoleBinding
    in the watched namespace plus its KopfPeering, cluster-wide only the reading of namespaces
    and CRDs; the operator runs with the chart's --peering name."""
    namespace = f"c-{uuid.uuid4().hex[:10]}"
    assert control_plane.kubectl("create", "namespace", namespace).returncode == 0
    values = ["workers[0].apps={tests.runtime.flows}"]
    if scope == "cluster-wide":
        values += ["operator.clusterWide=true"]
    else:
        values += [f"operator.namespaces={{{namespace}}}", "operator.replicas=2"]
    docs = _render(helm, namespace, *values)
    crds = control_plane.kubectl("apply", "-f", str(CRDS))  # kopf's too: KopfPeering below
    assert crds.returncode == 0, crds.stderr
    objects = [d for d in docs if d["kind"] not in ("CustomResourceDefinition", "List")]
    rendered = tmp_path / "rendered.json"
    rendered.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}))
    dry = control_plane.kubectl("apply", "--dry-run=server", "-f", str(rendered))
    assert dry.returncode == 0, dry.stderr  # every object is valid for this API server
    access = [d for d in docs if d["kind"] in _ACCESS]
    if scope != "cluster-wide":  # cluster-wide: reading namespaces and CRDs, nothing else
        assert {d["kind"] for d in access} == set(_ACCESS) - {"ClusterKopfPeering"}
        for role in (d for d in access if d["kind"] == "ClusterRole"):
            assert {v for r in role["rules"] for v in r["verbs"]} == {"get", "list", "watch"}
            assert {r for rule in role["rules"] for r in rule["resources"]} == {
                "namespaces",
                "customresourcedefinitions",
            }
    (tmp_path / "rbac.json").write_text(
        json.dumps({"apiVersion": "v1", "kind": "List", "items": access})
    )
    applied = control_plane.kubectl("apply", "-f", str(tmp_path / "rbac.json"))
    assert applied.returncode == 0, applied.stderr
    operator_pod = next(
        d for d in docs if d["kind"] == "Deployment" and d["metadata"]["name"].endswith("-operator")
    )["spec"]["template"]["spec"]["containers"][0]
    peering = [a.split("=", 1)[1] for a in operator_pod["args"] if a.startswith("--peering=")]
    account = next(d for d in docs if d["kind"] == "ServiceAccount")["metadata"]["name"]
    token = control_plane.kubectl("create", "token", account, "-n", namespace)
    assert token.returncode == 0, token.stderr
    kubeconfig = _token_kubeconfig(control_plane, token.stdout.strip(), tmp_path)

    db = tmp_path / "wayline.db"
    world = LocalWorld(db, poll_interval=0.01)
    await world.start()
    env = _kubeconfig_env(f"sqlite:///{db}", kubeconfig)
    if peering:  # as the pod's --peering=NAME
        env["WAYLINE_OPERATOR_PEERING"] = peering[0]
    assert bool(peering) == (scope != "cluster-wide"), operator_pod["args"]
    operator = Operator(namespace, env, tmp_path / "op.log")
    operator.start()
    try:
        async with wayline.Worker(world, APPS, settings=settings()):
            manifest = {
                "apiVersion": "wayline.dev/v1alpha1",
                "kind": "WorkflowRun",
                "metadata": {"name": "rbac", "namespace": namespace},
                "spec": {"workflow": "chain", "input": [3]},
            }
            (tmp_path / "run.json").write_text(json.dumps(manifest))
            assert control_plane.kubectl("apply", "-f", str(tmp_path / "run.json")).returncode == 0

            async def completed() -> bool:
                got = control_plane.kubectl("-n", namespace, "get", "wfr", "rbac", "-o", "json")
                return json.loads(got.stdout).get("status", {}).get("phase") == "completed"

            await wait_for(completed, timeout=30, interval=0.3)
    finally:
        operator.stop()
        await world.close()
    log = (tmp_path / "op.log").read_text()
    # a 403 status, not the milliseconds of a log line's timestamp (",403")
    assert "Forbidden" not in log and not re.search(r"(?<![,.\d])403(?!\d)", log), log[-3000:]
    if peering:
        assert f"peering {peering[0]!r}" in log, log[-3000:]


def _token_kubeconfig(control_plane: Any, token: str, tmp_path: Path) -> Path:
    """The admin kubeconfig's cluster, with the ServiceAccount's token as the user."""
    admin = yaml.safe_load(Path(control_plane.kubeconfig).read_text())
    admin["users"] = [{"name": "operator", "user": {"token": token}}]
    for ctx in admin["contexts"]:
        ctx["context"]["user"] = "operator"
    path = tmp_path / "operator.kubeconfig"
    path.write_text(yaml.safe_dump(admin))
    return path
