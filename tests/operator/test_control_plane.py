"""The plane itself serves: built-in resources, and a CRD with a custom object of its own (a
throwaway group, so it can never clash with the operator's WorkflowRun)."""

from __future__ import annotations

import json
import subprocess
import uuid

from tests.operator.control_plane import ControlPlane

CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "gadgets.test.wayline.dev"},
    "spec": {
        "group": "test.wayline.dev",
        "scope": "Namespaced",
        "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget"},
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "properties": {
                            "spec": {
                                "type": "object",
                                "properties": {"size": {"type": "integer"}},
                            }
                        },
                    }
                },
            }
        ],
    },
}


def ok(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_namespaces_are_served(control_plane: ControlPlane) -> None:
    names = ok(control_plane.kubectl("get", "namespaces", "-o", "name")).split()
    assert "namespace/default" in names
    assert control_plane.server.startswith("https://127.0.0.1:")


def test_a_custom_resource_round_trips(control_plane: ControlPlane) -> None:
    kubectl = control_plane.kubectl
    ok(kubectl("apply", "-f", "-", input=json.dumps(CRD)))
    ok(kubectl("wait", "--for=condition=Established", "crd/gadgets.test.wayline.dev"))
    name = f"g-{uuid.uuid4().hex[:8]}"
    gadget = {
        "apiVersion": "test.wayline.dev/v1",
        "kind": "Gadget",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"size": 3},
    }
    ok(kubectl("create", "-f", "-", input=json.dumps(gadget)))
    read = json.loads(ok(kubectl("get", "gadget", name, "-n", "default", "-o", "json")))
    assert read["spec"] == {"size": 3}
    assert read["metadata"]["uid"]
