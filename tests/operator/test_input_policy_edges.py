"""Edges of the admission policy that keeps a run's input (30c2e0d), on the real API server:
the writes that do not change ``spec.input`` (the operator's finalizers and annotations, a
status write, the same input sent again) must pass, whatever the input is."""

from __future__ import annotations

import json
import uuid
from typing import Any

from tests.operator.test_workflowrun import crd_applied  # noqa: F401 - fixture


def _run(plane: Any, name: str, spec: dict[str, Any]) -> None:
    body = {
        "apiVersion": "wayline.dev/v1alpha1",
        "kind": "WorkflowRun",
        "metadata": {"name": name, "namespace": "default"},
        "spec": spec,
    }
    made = plane.kubectl("create", "-f", "-", input=json.dumps(body))
    assert made.returncode == 0, made.stderr


def _patch(plane: Any, name: str, patch: dict[str, Any], *extra: str) -> Any:
    return plane.kubectl(
        *("patch", "wfr", name, "-n", "default", "--type=merge", *extra),
        *("-p", json.dumps(patch)),
    )


def _finalize(plane: Any, name: str) -> None:
    """What kopf does to every run it handles: a finalizer and an annotation, then (at
    deletion) the finalizer removed."""
    added = _patch(
        plane,
        name,
        {
            "metadata": {
                "finalizers": ["kopf.zalando.org/KopfFinalizerMarker"],
                "annotations": {"kopf.zalando.org/last-handled-configuration": "{}"},
            }
        },
    )
    assert added.returncode == 0, added.stderr
    status = _patch(plane, name, {"status": {"phase": "running"}}, "--subresource=status")
    assert status.returncode == 0, status.stderr
    removed = _patch(plane, name, {"metadata": {"finalizers": None}})
    assert removed.returncode == 0, removed.stderr
    plane.kubectl("delete", "wfr", name, "-n", "default", "--wait=false")


def test_the_operators_writes_pass_for_a_large_input(
    control_plane: Any,
    crd_applied: None,  # noqa: F811
) -> None:
    """A big (but legal: under the API server's request limit) input: comparing it must not
    cost more than the policy may spend, or every write to the run is refused (failurePolicy
    Fail) - the operator's finalizer could never be removed."""
    name = f"big-{uuid.uuid4().hex[:8]}"
    _run(
        plane := control_plane,
        name,
        {"workflow": "w", "input": [f"item-{i}" for i in range(110_000)]},
    )
    _finalize(plane, name)


def test_the_operators_writes_pass_for_a_deep_input(
    control_plane: Any,
    crd_applied: None,  # noqa: F811
) -> None:
    name = f"deep-{uuid.uuid4().hex[:8]}"
    rows = [{"id": i, "tags": ["a", "b"], "price": i + 0.5, "note": None} for i in range(5000)]
    _run(control_plane, name, {"workflow": "w", "input": {"rows": rows}})
    _finalize(control_plane, name)


def test_the_same_input_sent_again_passes(
    control_plane: Any,
    crd_applied: None,  # noqa: F811
) -> None:
    """1 and 1.0 are one JSON number; null is an input too; server-side apply of the same."""
    plane = control_plane
    for i, (first, again) in enumerate(
        [(1, 1.0), (None, None), ([1, {"a": 2}], [1.0, {"a": 2.0}])]
    ):
        name = f"same-{i}-{uuid.uuid4().hex[:6]}"
        _run(plane, name, {"workflow": "w", "input": first})
        edit = _patch(plane, name, {"spec": {"input": again, "cancel": True}})
        assert edit.returncode == 0, (first, again, edit.stderr)
        _finalize(plane, name)
    name = f"ssa-{uuid.uuid4().hex[:6]}"
    body = {
        "apiVersion": "wayline.dev/v1alpha1",
        "kind": "WorkflowRun",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"workflow": "w", "input": {"x": 1}},
    }
    for cancel in (False, True):
        body["spec"]["cancel"] = cancel
        applied = plane.kubectl("apply", "--server-side", "-f", "-", input=json.dumps(body))
        assert applied.returncode == 0, applied.stderr
    replaced = plane.kubectl("replace", "-f", "-", input=json.dumps(body))
    assert replaced.returncode == 0, replaced.stderr
    _finalize(plane, name)


def test_helm_install_creates_the_input_policy_from_the_charts_crds(control_plane: Any) -> None:
    """The chart carries the policy in ``crds/`` (a ``List`` in a .json file): a real ``helm
    install`` creates it (deleted first, in case another test applied ``crds/``)."""
    import subprocess
    from pathlib import Path

    from tests.operator.test_chart import CHART

    helm = Path(control_plane.bin_dir) / "helm"
    assert helm.is_file()
    plane = control_plane
    plane.kubectl("delete", "validatingadmissionpolicybinding", "wayline-workflowrun-input")
    plane.kubectl("delete", "validatingadmissionpolicy", "wayline-workflowrun-input")
    namespace = f"h-{uuid.uuid4().hex[:8]}"
    assert plane.kubectl("create", "namespace", namespace).returncode == 0
    done = subprocess.run(
        [
            *(str(helm), "install", f"--kubeconfig={plane.kubeconfig}", namespace, str(CHART)),
            *("--namespace", namespace, "--set", "workers[0].apps={myapp.flows}"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    for kind in ("validatingadmissionpolicy", "validatingadmissionpolicybinding"):
        got = plane.kubectl("get", kind, "wayline-workflowrun-input")
        assert got.returncode == 0, got.stderr
