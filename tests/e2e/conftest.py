"""The e2e suite's fixtures: one real cluster per session (tests/e2e/clusters.py), and per test
a ``helm install`` of the chart in a namespace of its own (NATS, operator, two worker pods
serving the examples and tests/e2e/flows.py), uninstalled with its namespace afterwards.

Run with ``make e2e`` (``pytest -o addopts= tests/e2e``; ``make test`` leaves this folder
out). A machine that can run neither kind nor tools/cluster skips, or fails with the reason
when ``CI=true`` / ``WAYLINE_REQUIRE_ALL_COMPONENTS=1``.
"""

from __future__ import annotations

import json
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import require_all_components
from tests.e2e import clusters
from tests.e2e.clusters import (
    IMAGE_REPOSITORY,
    IMAGE_TAG,
    ROOT,
    Cluster,
    choose,
    say,
    start_kind,
    start_local,
)

CHART = ROOT / "charts" / "wayline"
FLOWS = Path(__file__).with_name("flows.py")
OTHER_APP = Path(__file__).with_name("other_app.py")
GROUP, VERSION = "wayline.dev", "v1alpha1"
#: Short leases so a killed owner's step is recovered within the test's patience.
WORKER_ENV = {
    "WORKFLOW_INLINE_OWNERSHIP_LEASE_SECONDS": "20",  # above bound + visibility (12 + 4)
    "WAYLINE_MAX_INVOCATION_SECONDS": "12",
    "WAYLINE_VISIBILITY_SECONDS": "4",
}


@pytest.fixture(scope="session")
def cluster(pytestconfig: pytest.Config) -> Iterator[Cluster]:
    clusters.CONFIG = pytestconfig
    how, why_not = choose()
    if how is None:
        reason = f"e2e: this machine can run no cluster ({why_not})"
        if require_all_components():
            pytest.fail(f"{reason}; required because CI=true or WAYLINE_REQUIRE_ALL_COMPONENTS=1")
        pytest.skip(reason)
    made = start_kind() if how == "kind" else start_local()
    try:
        yield made
    finally:
        report = made.stop()
        for line in report.splitlines():
            say(line)


def _client(cluster: Cluster) -> Any:
    from kubernetes import config

    return config.new_client_from_config(config_file=str(cluster.kubeconfig))


@dataclass
class Release:
    """One installation of the chart, and what the tests do with it."""

    cluster: Cluster
    namespace: str
    api: Any
    name: str = "e2e"
    values: dict[str, Any] = field(default_factory=dict)
    """What ``helm install`` was given (``add_worker`` upgrades with more)."""
    values_file: Path | None = None

    @property
    def core(self) -> Any:
        from kubernetes import client

        return client.CoreV1Api(self.api)

    @property
    def custom(self) -> Any:
        from kubernetes import client

        return client.CustomObjectsApi(self.api)

    @property
    def apps(self) -> Any:
        from kubernetes import client

        return client.AppsV1Api(self.api)

    def kubectl(self, *args: str, **kw: Any) -> Any:
        return self.cluster.kubectl("-n", self.namespace, *args, **kw)

    def add_worker(self, name: str, apps: list[str], **extra: Any) -> None:
        """Another worker Deployment (another application) in this installation, by
        ``helm upgrade --wait`` with the same values plus the new worker entry."""
        assert self.values_file is not None
        first = self.values["workers"][0]
        entry = {
            **{k: first[k] for k in ("env", "extraVolumes", "extraVolumeMounts")},
            "name": name,
            "apps": apps,
            "replicas": 1,
            "terminationGracePeriodSeconds": 20,
            **extra,
        }
        self.values["workers"].append(entry)
        self.values_file.write_text(yaml.safe_dump(self.values))
        self.cluster.helm(
            "upgrade",
            self.name,
            str(CHART),
            "-n",
            self.namespace,
            "-f",
            str(self.values_file),
            "--wait",
            "--timeout",
            "5m",
        )

    # --- WorkflowRuns and WorkflowHooks, through the kubernetes client -----------------------
    def create(self, kind: str, name: str, spec: dict[str, Any]) -> None:
        plural = {"WorkflowRun": "workflowruns", "WorkflowHook": "workflowhooks"}[kind]
        body = {"apiVersion": f"{GROUP}/{VERSION}", "kind": kind, "metadata": {"name": name}}
        self.custom.create_namespaced_custom_object(
            GROUP, VERSION, self.namespace, plural, {**body, "spec": spec}
        )

    def run(self, name: str, workflow: str, *args: Any) -> None:
        self.create("WorkflowRun", name, {"workflow": workflow, "input": list(args)})

    def status(self, name: str, plural: str = "workflowruns") -> dict[str, Any]:
        got = self.custom.get_namespaced_custom_object(GROUP, VERSION, self.namespace, plural, name)
        status: dict[str, Any] = got.get("status") or {}
        return status

    def wait_phase(
        self, names: list[str], phases: tuple[str, ...], timeout: float = 180
    ) -> dict[str, dict[str, Any]]:
        """Each run's status once all of them are in one of ``phases`` (terminal phases other
        than those fail at once)."""
        deadline = time.monotonic() + timeout
        seen: dict[str, dict[str, Any]] = {}
        while True:
            listed = self.custom.list_namespaced_custom_object(
                GROUP, VERSION, self.namespace, "workflowruns"
            )
            seen = {
                item["metadata"]["name"]: item.get("status") or {}
                for item in listed["items"]
                if item["metadata"]["name"] in names
            }
            done = [n for n in names if seen.get(n, {}).get("phase") in phases]
            if len(done) == len(names):
                return seen
            stuck = {
                n: s
                for n, s in seen.items()
                if s.get("phase") in ("completed", "failed", "cancelled") and n not in done
            }
            assert not stuck, f"runs ended otherwise: {json.dumps(stuck)[:3000]}"
            if time.monotonic() > deadline:
                phases_now = {n: seen.get(n, {}).get("phase") for n in names}
                raise AssertionError(
                    f"not all {phases} after {timeout}s: {phases_now}\n{self.diagnose()}"
                )
            time.sleep(1)

    # --- pods ---------------------------------------------------------------------------------
    def pods(self, component: str) -> list[Any]:
        selector = f"app.kubernetes.io/instance={self.name},app.kubernetes.io/component={component}"
        listed = self.core.list_namespaced_pod(self.namespace, label_selector=selector)
        return [p for p in listed.items if p.metadata.deletion_timestamp is None]

    def ready_pods(self, component: str) -> list[Any]:
        return [
            p
            for p in self.pods(component)
            if p.status.phase == "Running"
            and all(c.ready for c in (p.status.container_statuses or []))
        ]

    def wait_ready(self, component: str, count: int, timeout: float = 180) -> list[Any]:
        deadline = time.monotonic() + timeout
        while True:
            pods = self.ready_pods(component)
            if len(pods) >= count:
                return pods
            assert time.monotonic() < deadline, (
                f"{component}: {len(pods)}/{count} ready after {timeout}s\n{self.diagnose()}"
            )
            time.sleep(1)

    def exec(self, pod: str, *command: str) -> str:
        done: str = self.kubectl("exec", pod, "--", *command, timeout=60).stdout
        return done

    def marks(self, key: str) -> dict[str, list[tuple[str, float]]]:
        """The marker files of ``key`` (tests/e2e/flows.py): {"start"|"end": [(pod, time)]}."""
        return self.marks_matching(f"{key}.*").get(key, {"start": [], "end": []})

    def marks_matching(self, pattern: str) -> dict[str, dict[str, list[tuple[str, float]]]]:
        """The marker files whose names match the glob ``pattern``, read in one exec, by key:
        {key: {"start"|"end": [(pod, time)]}}."""
        pod = self.wait_ready("worker", 1)[0].metadata.name
        script = (
            "import json, pathlib; print(json.dumps({p.name: p.read_text() "
            f"for p in pathlib.Path('/marks').glob('{pattern}')}}))"
        )
        files = json.loads(self.exec(pod, "python", "-c", script))
        found: dict[str, dict[str, list[tuple[str, float]]]] = {}
        for name, text in files.items():
            key, what, pod_name, _ = name.rsplit(".", 3)
            found.setdefault(key, {"start": [], "end": []})[what].append((pod_name, float(text)))
        return found

    def stream_leader(self) -> str:
        """The server that leads the world's event log stream, as JetStream tells a worker pod
        (with the pod's own world URL); the chart names each NATS server after its pod."""
        pod = self.wait_ready("worker", 1)[0].metadata.name
        script = (
            "import asyncio, os, nats\n"
            "from wayline.worlds.nats import NatsWorld\n"
            "async def ignore(err): pass\n"
            "async def main():\n"
            "    world = NatsWorld.from_url(os.environ['WAYLINE_WORLD'])\n"
            "    nc = await nats.connect(**world._options.connect_kwargs(ignore))\n"
            "    info = await nc.jetstream().stream_info(world.names.events_stream)\n"
            "    print(info.cluster.leader or '')\n"
            "    await nc.close()\n"
            "asyncio.run(main())\n"
        )
        return self.exec(pod, "python", "-c", script).strip()

    def world_runs(self, workflow: str) -> list[dict[str, Any]]:
        """The runs of ``workflow`` in the world (NATS), as ``wayline runs list`` in a pod."""
        pod = self.wait_ready("worker", 1)[0].metadata.name
        out = self.exec(
            pod, "wayline", "runs", "list", "--workflow", workflow, "--limit", "1000", "--json"
        )
        runs: list[dict[str, Any]] = json.loads(out)
        return runs

    def worker_status(self, name: str) -> dict[str, Any]:
        """The status of the WorkflowWorker ``name`` ({} before the operator's first look)."""
        found = json.loads(self.kubectl("get", "wfw", name, "-o", "json").stdout)
        status: dict[str, Any] = found.get("status") or {}
        return status

    def diagnose(self) -> str:
        pods = self.kubectl("get", "pods", "-o", "wide", check=False).stdout
        events = self.kubectl("get", "events", "--sort-by=.lastTimestamp", check=False).stdout
        logs = self.kubectl("logs", "deploy/e2e-wayline-operator", "--tail=30", check=False).stdout
        return f"{pods}\n{events[-3000:]}\noperator log:\n{logs}"


@dataclass(frozen=True)
class Install:
    """What a test asks of its installation beyond the suite's defaults."""

    values: dict[str, Any] = field(default_factory=dict)
    """Chart values, merged over the suite's."""
    worker_env: dict[str, str] = field(default_factory=lambda: dict(WORKER_ENV))
    """The worker pods' environment (the suite's short leases unless the test says)."""


SCALING = Install(
    values={
        "workerResource": "WorkflowWorker",
        # a look at the WorkflowWorker every 2 s instead of 10, so the scaling is seen
        "operator": {"env": {"WAYLINE_OPERATOR_WORKER_SECONDS": "2"}},
    }
)
"""The installation of the tests that watch a WorkflowWorker's version scale: the worker as a
WorkflowWorker, which the operator looks at every 2 s."""


def current_version(status: dict[str, Any]) -> dict[str, Any]:
    """The current version's row of a WorkflowWorker's status ({} before the first look)."""
    rows = [r for r in status.get("versions") or [] if r["state"] == "Current"]
    return rows[0] if rows else {}


def merged(base: dict[str, Any], more: dict[str, Any]) -> dict[str, Any]:
    """``base`` with ``more``'s values, nested mappings merged key by key (as helm does)."""
    out = dict(base)
    for key, value in more.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merged(out[key], value)
        else:
            out[key] = value
    return out


@pytest.fixture
def release(cluster: Cluster, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Release]:
    """The chart installed with the suite's values. A test parametrised indirectly with an
    :class:`Install` (``@pytest.mark.parametrize("release", [Install(...)], indirect=True)``)
    adds its own values to them, and gives the workers its own environment."""
    install: Install = getattr(request, "param", Install())
    namespace = f"e2e-{uuid.uuid4().hex[:8]}"
    cluster.kubectl("create", "namespace", namespace)
    rel = Release(cluster, namespace, _client(cluster))
    try:
        rel.kubectl(
            "create",
            "configmap",
            "e2e-flows",
            f"--from-file=flows.py={FLOWS}",
            f"--from-file=other_app.py={OTHER_APP}",
        )
        claim = {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": "marks"},
            "spec": {
                "accessModes": ["ReadWriteOnce"],
                "resources": {"requests": {"storage": "64Mi"}},
            },
        }
        rel.kubectl("apply", "-f", "-", input=json.dumps(claim))
        values: dict[str, Any] = {
            "image": {"repository": IMAGE_REPOSITORY, "tag": IMAGE_TAG},
            # these tests drive the worker Deployments by name (set image, scale) and wait for
            # them with helm --wait: the plain Deployments, not WorkflowWorkers' versions
            "workerResource": "Deployment",
            "operator": {
                "namespaces": [namespace],
                "statusIntervalSeconds": 1,
                "sweepSeconds": 5,
                "hookRetrySeconds": 1,
            },
            "workers": [
                {
                    "name": "default",
                    "apps": ["examples.orders", "/e2e/flows.py"],
                    "replicas": 2,
                    "terminationGracePeriodSeconds": 20,
                    "env": install.worker_env,
                    "extraVolumes": [
                        {"name": "flows", "configMap": {"name": "e2e-flows"}},
                        {"name": "marks", "persistentVolumeClaim": {"claimName": "marks"}},
                    ],
                    "extraVolumeMounts": [
                        {"name": "flows", "mountPath": "/e2e", "readOnly": True},
                        {"name": "marks", "mountPath": "/marks"},
                    ],
                }
            ],
        }
        values = merged(merged(values, cluster.values), install.values)
        values_file = tmp_path / "values.yaml"
        values_file.write_text(yaml.safe_dump(values))
        rel.values, rel.values_file = values, values_file
        started = time.monotonic()
        cluster.helm(
            "install",
            rel.name,
            str(CHART),
            "-n",
            namespace,
            "-f",
            str(values_file),
            "--wait",
            "--timeout",
            "5m",
        )
        say(f"  helm install --wait: {time.monotonic() - started:.1f}s")
        yield rel
    finally:
        uninstall(cluster, rel)


def uninstall(cluster: Cluster, rel: Release) -> None:
    """Runs and hooks first, while the operator can still release their finalizers (else the
    namespace would hang in Terminating); any it could not, by patch; then the release, then
    the namespace."""
    kinds = "workflowruns.wayline.dev,workflowhooks.wayline.dev"
    rel.kubectl("delete", kinds, "--all", "--timeout=60s", check=False, timeout=90)
    left = rel.kubectl("get", kinds, "-o", "name", check=False).stdout.split()
    for name in left:
        rel.kubectl(
            "patch", name, "--type=merge", "-p", '{"metadata":{"finalizers":null}}', check=False
        )
    subprocess.run(
        [
            str(cluster.helm_bin),
            f"--kubeconfig={cluster.kubeconfig}",
            "uninstall",
            rel.name,
            "-n",
            rel.namespace,
            "--wait",
            "--timeout",
            "2m",
        ],
        capture_output=True,
        timeout=180,
    )
    cluster.kubectl(
        "delete", "namespace", rel.namespace, "--timeout=120s", check=False, timeout=150
    )
