"""The chart keeps two releases apart: by default the operator watches the release's namespace
only, every operator is given an instance id (``--instance``), a cluster-wide operator is an
explicit choice, and the NOTES warn (``helm install --dry-run=server``, whose ``lookup`` reads
the real API server) when another cluster-wide Wayline operator is installed."""

from __future__ import annotations

import json
import re
import subprocess
import uuid
from pathlib import Path
from typing import Any

from tests.operator.test_chart import CHART, _render, _template_error, helm  # noqa: F401

WORKERS = "workers[0].apps={myapp.flows}"


def _operator_args(docs: list[dict[str, Any]]) -> list[str]:
    deployment = next(
        d for d in docs if d["kind"] == "Deployment" and d["metadata"]["name"].endswith("-operator")
    )
    args: list[str] = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    return args


def _kinds(docs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [d for d in docs if d["kind"] == kind]


def test_by_default_the_operator_watches_its_release_namespace_only(
    helm: Path,  # noqa: F811
) -> None:
    docs = _render(helm, "ns1", WORKERS)
    args = _operator_args(docs)
    assert [a for a in args if a.startswith(("--namespace", "--instance"))] == [
        "--instance=ns1.t1",
        "--namespace=ns1",
    ]
    [role] = _kinds(docs, "Role")
    assert role["metadata"]["namespace"] == "ns1"
    assert role["metadata"]["labels"]["wayline.dev/instance"] == "ns1.t1"
    [discovery] = _kinds(docs, "ClusterRole")  # kopf's scanning: read-only, nothing else
    assert {r for rule in discovery["rules"] for r in rule["resources"]} == {
        "namespaces",
        "customresourcedefinitions",
    }


def test_a_cluster_wide_operator_is_chosen_and_labelled_with_its_instance(
    helm: Path,  # noqa: F811
) -> None:
    docs = _render(helm, "ns1", WORKERS, "operator.clusterWide=true")
    args = _operator_args(docs)
    assert "--instance=ns1.t1" in args and not [a for a in args if a.startswith("--namespace")]
    [role] = _kinds(docs, "ClusterRole")
    assert role["metadata"]["labels"]["wayline.dev/instance"] == "ns1.t1"
    assert any("workflowruns" in r["resources"] for r in role["rules"])
    assert not _kinds(docs, "Role")
    named = _operator_args(_render(helm, "ns1", WORKERS, "operator.instance=blue"))
    assert "--instance=blue" in named


def test_the_chart_refuses_cluster_wide_with_namespaces_and_a_bad_instance(
    helm: Path,  # noqa: F811
) -> None:
    both = _template_error(
        helm,
        "--set",
        WORKERS,
        "--set",
        "operator.clusterWide=true",
        "--set",
        "operator.namespaces={a}",
    )
    assert "leave operator.namespaces empty" in both
    assert "instance" in _template_error(helm, "--set", WORKERS, "--set", "operator.instance=a/b")


def test_a_long_release_gets_an_instance_that_is_still_a_label_value(
    helm: Path,  # noqa: F811
) -> None:
    namespace = "n" * 63
    docs = _render(helm, namespace, WORKERS)
    [instance] = [a.split("=", 1)[1] for a in _operator_args(docs) if a.startswith("--instance=")]
    assert len(instance) <= 63 and instance.startswith("n" * 54)
    assert re.fullmatch(r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?", instance)


def _cluster_role(control_plane: Any, name: str, labels: dict[str, str], tmp_path: Path) -> None:
    role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": name, "labels": {"app.kubernetes.io/name": "wayline", **labels}},
        "rules": [
            {
                "apiGroups": ["wayline.dev"],
                "resources": ["workflowruns", "workflowhooks"],
                "verbs": ["get", "list", "watch", "patch"],
            }
        ],
    }
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(role))
    done = control_plane.kubectl("apply", "-f", str(path))
    assert done.returncode == 0, done.stderr


def test_the_notes_warn_of_another_cluster_wide_operator(
    helm: Path,  # noqa: F811
    control_plane: Any,
    tmp_path: Path,
) -> None:
    suffix = uuid.uuid4().hex[:8]
    old, new = f"old-{suffix}-wayline-operator", f"new-{suffix}-wayline-operator"
    _cluster_role(control_plane, old, {}, tmp_path)  # as a release of an earlier version
    _cluster_role(control_plane, new, {"wayline.dev/instance": f"ns9.new-{suffix}"}, tmp_path)
    crds = control_plane.kubectl("apply", "-f", str(CHART.parents[1] / "crds"))
    assert crds.returncode == 0, crds.stderr
    try:
        notes = _dry_run_notes(helm, control_plane, f"prod-{suffix}")
    finally:
        for name in (old, new):
            control_plane.kubectl("delete", "clusterrole", name)
    assert f"instance default.prod-{suffix}" in notes
    assert f"WARNING: another cluster-wide Wayline operator is installed (ClusterRole {old})" in (
        notes
    )
    assert f"(ClusterRole {new}, instance ns9.new-{suffix}): it owns only" in notes


def _dry_run_notes(helm: Path, control_plane: Any, release: str) -> str:  # noqa: F811
    """The NOTES of an install that reads the cluster (``lookup``) and creates nothing."""
    done = subprocess.run(
        [
            str(helm),
            "install",
            f"--kubeconfig={control_plane.kubeconfig}",
            release,
            str(CHART),
            "--dry-run=server",
            "--namespace",
            "default",
            "--set",
            WORKERS,
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.split("NOTES:", 1)[1]


def test_the_operator_may_read_and_annotate_pods_but_not_delete_them(
    helm: Path,  # noqa: F811
) -> None:
    """Before a scale-down the operator sets each pod's deletion cost (docs/operator.md): its
    role, namespaced or cluster-wide, grants get, list and patch on pods, and nothing more."""
    for values in ((), ("operator.clusterWide=true",)):
        docs = _render(helm, "ns1", WORKERS, *values)
        [role] = _kinds(docs, "ClusterRole" if values else "Role")
        verbs = {
            v
            for rule in role["rules"]
            if "" in rule["apiGroups"] and "pods" in rule["resources"]
            for v in rule["verbs"]
        }
        assert verbs == {"get", "list", "patch"}, values
