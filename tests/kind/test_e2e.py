"""End to end on a kind cluster: build the image, load it, ``helm install`` the chart (NATS,
operator, a worker serving the examples), ``kubectl apply`` a WorkflowRun and a WorkflowHook,
and watch the run complete in its status.

Needs a container engine and kind, which this project's build machine does not have: the
suite is skipped there with that reason (the operator suite in tests/operator covers the same
paths on a real API server, with worker processes standing in for pods).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
IMAGE = "wayline:e2e"


def _engine_ready() -> bool:
    docker, kind = shutil.which("docker"), shutil.which("kind")
    if not docker or not kind:
        return False
    return subprocess.run([docker, "info"], capture_output=True, timeout=30).returncode == 0


pytestmark = pytest.mark.skipif(
    not _engine_ready(), reason="kind e2e: no running container engine or no kind binary here"
)


def sh(
    *args: str, timeout: float = 600, input: str | None = None
) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(args, capture_output=True, text=True, timeout=timeout, input=input)
    assert done.returncode == 0, f"{' '.join(args)}\n{done.stdout}\n{done.stderr}"
    return done


@pytest.fixture(scope="module")
def cluster() -> Iterator[str]:
    name = f"wayline-{uuid.uuid4().hex[:6]}"
    sh("docker", "build", "-t", IMAGE, str(ROOT))
    sh(
        "kind",
        "create",
        "cluster",
        "--name",
        name,
        "--config",
        str(ROOT / "deploy" / "kind-config.yaml"),
    )
    try:
        sh("kind", "load", "docker-image", IMAGE, "--name", name)
        yield name
    finally:
        subprocess.run(["kind", "delete", "cluster", "--name", name], timeout=300)


def test_helm_install_then_a_workflowrun_completes(cluster: str) -> None:
    ctx = f"kind-{cluster}"
    sh(
        "helm",
        "install",
        "e2e",
        str(ROOT / "deploy" / "helm" / "wayline"),
        "--kube-context",
        ctx,
        "--set",
        "image.repository=wayline",
        "--set",
        "image.tag=e2e",
        "--set",
        "workers[0].apps={examples.orders}",
        "--wait",
        "--timeout",
        "5m",
    )
    run = {
        "apiVersion": "wayline.dev/v1alpha1",
        "kind": "WorkflowRun",
        "metadata": {"name": "o-1"},
        "spec": {
            "workflow": "orders",
            "input": {
                "order_id": "o-1",
                "customer": "ada",
                "items": [{"sku": "BOOK-42", "quantity": 1, "unit_price_cents": 1250}],
            },
        },
    }
    hook = {
        "apiVersion": "wayline.dev/v1alpha1",
        "kind": "WorkflowHook",
        "metadata": {"name": "approve-o-1"},
        "spec": {"token": "approve:o-1", "payload": {"approved": True, "by": "grace"}},
    }
    for manifest in (run, hook):
        sh("kubectl", "--context", ctx, "apply", "-f", "-", input=json.dumps(manifest))
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        got = sh("kubectl", "--context", ctx, "get", "wfr", "o-1", "-o", "json")
        phase = json.loads(got.stdout).get("status", {}).get("phase")
        if phase in ("completed", "failed", "cancelled"):
            break
        time.sleep(2)
    assert phase == "completed"
