"""The first install as docs/operator.md's "Try it on this machine" writes it: the commands it
gives name Makefile targets, scripts and files that exist; the values `make cluster` gives the
chart name the images tools/cluster/images.sh builds and pass the API server's dry run; and
examples/k8s (the same resources as the chart's NOTES), applied as they are to a real API
server with the operator and a worker of examples.orders, run the order to ``shipped``.

The cluster itself (``make cluster``: root, a private dockerd, minutes) is not brought up here:
the e2e suite owns the machine's one local cluster while it runs."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml
from examples.orders import Approval, Order, orders

import wayline
from tests.operator.test_chart import CHART, helm, notes  # noqa: F401 - helm is a fixture
from tests.operator.test_workflowrun import (  # noqa: F401 - cluster, crd_applied: fixtures
    CRDS,
    Cluster,
    cluster,
    crd_applied,
)
from tests.runtime.harness import settings

ROOT = Path(__file__).resolve().parents[2]
TOOLS = ROOT / "tools" / "cluster"
EXAMPLES = ROOT / "examples" / "k8s"
RUN_FILE, HOOK_FILE = EXAMPLES / "orders-run.yaml", EXAMPLES / "orders-approve.yaml"


def _section() -> str:
    text = (ROOT / "docs" / "operator.md").read_text()
    section = text.split("## Try it on this machine", 1)[1]
    return section.split("\n## ", 1)[0]


def _commands() -> list[list[str]]:
    blocks = re.findall(r"```sh\n(.*?)```", _section(), flags=re.S)
    return [shlex.split(line) for block in blocks for line in block.splitlines() if line.strip()]


def _script_value(path: Path, name: str) -> str:
    match = re.search(rf"^{name}=(\S+)", path.read_text(), flags=re.M)
    assert match, f"no {name}= in {path}"
    return match.group(1)


def _makefile_targets() -> set[str]:
    return set(re.findall(r"^([a-z][\w.-]*):", (ROOT / "Makefile").read_text(), flags=re.M))


def _image_names(tag: str) -> list[str]:
    done = subprocess.run(
        ["bash", str(TOOLS / "images.sh"), "--names", tag], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


def test_the_try_it_section_runs_targets_scripts_and_files_that_exist() -> None:
    commands = _commands()
    assert commands, "no commands in the section"
    found = re.search(r"^CLUSTER \?= (\S+)", (ROOT / "Makefile").read_text(), flags=re.M)
    assert found, "no CLUSTER ?= in the Makefile"
    cluster_name = found.group(1)
    assert cluster_name != "wayline-e2e"  # make e2e tears that one down
    namespace = _script_value(TOOLS / "install.sh", "NAMESPACE")
    run_name = yaml.safe_load(RUN_FILE.read_text())["metadata"]["name"]
    targets = _makefile_targets()
    kubectl_runs = 0
    for argv in commands:
        if argv[0] == "make":
            assert set(argv[1:]) <= targets, argv
        elif argv[0] == "export":
            # up.sh writes the host's kubeconfig into the cluster's state directory
            assert "KUBECONFIG_HOST=$STATE/admin.kubeconfig" in (TOOLS / "up.sh").read_text()
            assert argv[1] == f"KUBECONFIG=/var/lib/wayline-cluster/{cluster_name}/admin.kubeconfig"
            assert (
                "STATE=${WAYLINE_CLUSTER_STATE:-/var/lib/wayline-cluster/$NAME}"
                in (TOOLS / "lib.sh").read_text()
            )
        else:
            assert argv[0] == ".venv/bin/kubectl", argv  # where lib.sh and install.sh find it
            assert "KUBECTL=${KUBECTL:-$REPO/.venv/bin/kubectl}" in (TOOLS / "lib.sh").read_text()
            assert argv[1:3] == ["-n", namespace], argv
            kubectl_runs += 1
            for i, arg in enumerate(argv):
                if arg == "-f":
                    assert (ROOT / argv[i + 1]).is_file(), argv[i + 1]
                if arg.startswith("workflowrun/"):
                    assert arg == f"workflowrun/{run_name}"
    assert kubectl_runs >= 3
    applied = {a for argv in commands for a in argv if a.startswith("examples/")}
    assert applied == {"examples/k8s/orders-run.yaml", "examples/k8s/orders-approve.yaml"}
    assert ["make", "cluster"] in commands and ["make", "cluster-down"] in commands


def test_make_clusters_values_name_the_built_images_and_pass_the_dry_run(
    helm: Path,  # noqa: F811
    control_plane: Any,
    tmp_path: Path,
) -> None:
    tag = _script_value(TOOLS / "install.sh", "TAG")
    _pause, nats, project = _image_names(tag)
    assert project == tag and re.fullmatch(r"wayline\.local/nats:\d+\.\d+\.\d+", nats), nats
    made = subprocess.run(
        ["bash", str(TOOLS / "values.sh"), tag], capture_output=True, text=True, check=True
    )
    values = tmp_path / "values.yaml"
    values.write_text(made.stdout)
    namespace = _script_value(TOOLS / "install.sh", "NAMESPACE")
    release = _script_value(TOOLS / "install.sh", "RELEASE")
    rendered = subprocess.run(
        [str(helm), "template", release, str(CHART), "--namespace", namespace, "-f", str(values)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert rendered.returncode == 0, rendered.stderr
    docs = [d for d in yaml.safe_load_all(rendered.stdout) if d]
    images: dict[str, set[str]] = {}
    for doc in docs:
        if doc["kind"] in ("Deployment", "StatefulSet"):
            component = doc["metadata"]["labels"]["app.kubernetes.io/component"]
            for c in doc["spec"]["template"]["spec"]["containers"]:
                images.setdefault(component, set()).add(c["image"])
        elif doc["kind"] == "WorkflowWorker":  # the operator makes its version's Deployment
            images.setdefault("worker", set()).add(doc["spec"]["image"])
    # Every pod runs an image images.sh built (imported into the node: there is no registry).
    assert images == {"operator": {project}, "worker": {project}, "nats": {nats}}, images
    [worker] = [d for d in docs if d["kind"] == "WorkflowWorker"]
    assert worker["spec"]["apps"] == ["examples.orders"]
    ns = f"fi-{uuid.uuid4().hex[:8]}"
    assert control_plane.kubectl("create", "namespace", ns).returncode == 0
    crds = control_plane.kubectl("apply", "-f", str(CRDS))
    assert crds.returncode == 0, crds.stderr
    for doc in docs:
        doc["metadata"]["namespace"] = ns if "namespace" in doc["metadata"] else None
        if doc["metadata"]["namespace"] is None:
            del doc["metadata"]["namespace"]
    listed = tmp_path / "rendered.json"
    listed.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": docs}))
    dry = control_plane.kubectl("apply", "--dry-run=server", "-f", str(listed))
    assert dry.returncode == 0, dry.stderr
    assert dry.stdout.count("(server dry run)") == len(docs), dry.stdout


def _notes_resources(text: str) -> list[dict[str, Any]]:
    blocks = re.findall(r"<<'YAML'\n(.*?)\n\s*YAML", text, flags=re.S)
    return [yaml.safe_load(block) for block in blocks]


def test_the_notes_example_is_the_example_files_and_validates(
    helm: Path,  # noqa: F811
    control_plane: Any,
    crd_applied: None,  # noqa: F811
) -> None:
    text = notes(helm, control_plane, "workers[0].apps={examples.orders}")
    run, hook = _notes_resources(text)
    assert run == yaml.safe_load(RUN_FILE.read_text())
    assert hook == yaml.safe_load(HOOK_FILE.read_text())
    # The workflow's own argument types accept them (the operator never imports user code:
    # a worker would fail the run on input it cannot read).
    order = Order.model_validate(run["spec"]["input"])
    assert hook["spec"]["token"] == f"approve:{order.order_id}"
    Approval.model_validate(hook["spec"]["payload"])
    for path in (RUN_FILE, HOOK_FILE):  # the CRDs' schemas and the input policy admit them
        dry = control_plane.kubectl("apply", "--dry-run=server", "-n", "default", "-f", str(path))
        assert dry.returncode == 0, dry.stderr


async def test_the_example_files_applied_as_they_are_ship_the_order(
    cluster: Cluster,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("WAYLINE_PAYMENTS_DB", str(tmp_path / "payments.db"))
    name = yaml.safe_load(RUN_FILE.read_text())["metadata"]["name"]
    async with wayline.Worker(cluster.world, [orders], settings=settings()):
        cluster.kubectl("apply", "-f", str(RUN_FILE))
        await cluster.status_when(name, "running", timeout=60)
        cluster.kubectl("apply", "-f", str(HOOK_FILE))
        status = await cluster.status_when(name, "completed", timeout=60)
    assert status["output"]["status"] == "shipped"
    assert status["output"]["approved_by"] == "grace"
    hook = cluster.get(yaml.safe_load(HOOK_FILE.read_text())["metadata"]["name"], "workflowhook")
    assert hook["status"]["phase"] == "delivered"


def _install(tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """install.sh, stopped before it builds or brings up anything: with no helm it would
    refuse next, so a check that failed to refuse still starts nothing."""
    state = tmp_path / "clusters" / "wayline-dev"
    base = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "HOME": str(tmp_path)}
    base |= {"HELM": str(tmp_path / "no-helm"), "WAYLINE_CLUSTER_STATE": str(state)}
    return subprocess.run(
        ["bash", str(TOOLS / "install.sh")],
        env=base | env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_make_cluster_refuses_the_e2e_suites_cluster_and_a_second_cluster(
    tmp_path: Path,
) -> None:
    e2e = _install(tmp_path, WAYLINE_CLUSTER_NAME="wayline-e2e")
    assert e2e.returncode != 0 and "wayline-e2e is the e2e suite's cluster" in e2e.stderr
    (tmp_path / "clusters" / "wayline-e2e").mkdir(parents=True)  # the e2e suite's, running
    second = _install(tmp_path)
    assert second.returncode != 0, second.stderr
    assert "another local cluster is up" in second.stderr, second.stderr
    assert "make cluster-down CLUSTER=wayline-e2e" in second.stderr
    assert not (tmp_path / "clusters" / "wayline-dev").exists()  # nothing was made
