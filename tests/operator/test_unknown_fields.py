"""A WorkflowRun spec with a field the resource does not have (a typo: ``inputs``) is refused
by the real API server whatever the client: the Python client (which asks for no strict field
validation, so a pruning schema dropped the typo in silence and the run started with no
input), kubectl with ``--validate=false``, and kubectl as it comes; a nested typo too."""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

import pytest

from tests.operator.test_workflowrun import crd_applied  # noqa: F401 - fixture


def _body(spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "wayline.dev/v1alpha1",
        "kind": "WorkflowRun",
        "metadata": {"name": f"typo-{uuid.uuid4().hex[:8]}", "namespace": "default"},
        "spec": spec,
    }


def _python_client(plane: Any) -> Any:
    import kubernetes

    config = kubernetes.client.Configuration()
    kubernetes.config.load_kube_config(str(plane.kubeconfig), client_configuration=config)
    return kubernetes.client.CustomObjectsApi(kubernetes.client.ApiClient(config))


@pytest.mark.parametrize(
    ("spec", "named"),
    [
        ({"workflow": "chain", "inputs": [4]}, "unknown field(s) in spec: inputs"),
        (
            {"workflow": "chain", "compensation": {"resume": 1}},
            "unknown field(s) in spec.compensation: resume",
        ),
    ],
)
def test_the_python_client_cannot_create_a_run_with_an_unknown_field(
    control_plane: Any,
    crd_applied: None,  # noqa: F811
    spec: dict[str, Any],
    named: str,
) -> None:
    import kubernetes

    api = _python_client(control_plane)
    body = _body(spec)
    with pytest.raises(kubernetes.client.ApiException) as refused:
        api.create_namespaced_custom_object(
            "wayline.dev", "v1alpha1", "default", "workflowruns", body
        )
    assert refused.value.status == 422, refused.value.body
    assert named in json.loads(refused.value.body)["message"]
    gone = control_plane.kubectl("get", "wfr", body["metadata"]["name"], "-n", "default")
    assert gone.returncode != 0 and "NotFound" in gone.stderr


def test_kubectl_refuses_an_unknown_field_with_or_without_its_validation(
    control_plane: Any,
    crd_applied: None,  # noqa: F811
) -> None:
    for flags in ((), ("--validate=false",)):
        body = _body({"workflow": "chain", "inputs": [4]})
        made = control_plane.kubectl("create", *flags, "-f", "-", input=json.dumps(body))
        assert made.returncode != 0, made.stdout
        assert "unknown field(s) in spec: inputs" in made.stderr, made.stderr


def test_an_update_cannot_add_an_unknown_field(
    control_plane: Any,
    crd_applied: None,  # noqa: F811
) -> None:
    body = _body({"workflow": "chain", "input": [4]})
    made = control_plane.kubectl("create", "-f", "-", input=json.dumps(body))
    assert made.returncode == 0, made.stderr
    name = body["metadata"]["name"]
    try:
        api = _python_client(control_plane)
        import kubernetes

        with pytest.raises(kubernetes.client.ApiException) as refused:
            api.patch_namespaced_custom_object(
                "wayline.dev",
                "v1alpha1",
                "default",
                "workflowruns",
                name,
                {"spec": {"cancle": True}},
            )
        assert "unknown field(s) in spec: cancle" in json.loads(refused.value.body)["message"]
        kept = json.loads(
            control_plane.kubectl("get", "wfr", name, "-n", "default", "-o", "json").stdout
        )
        assert "cancle" not in kept["spec"] and kept["spec"]["input"] == [4]
    finally:
        control_plane.kubectl("delete", "wfr", name, "-n", "default", "--wait=false")


def _refused_by_the_python_client(plane: Any, kind: str, spec: dict[str, Any]) -> str:
    """Create a ``kind`` with the Python client until the API server refuses it (its CRD and
    its policy act a moment after they are created); the refusal's message. A creation that
    goes through is deleted, and tried again within 30 s."""
    import kubernetes

    api = _python_client(plane)
    plural = f"{kind.lower()}s"
    deadline = time.monotonic() + 30
    while True:
        name = f"typo-{uuid.uuid4().hex[:8]}"
        body = {
            "apiVersion": "wayline.dev/v1alpha1",
            "kind": kind,
            "metadata": {"name": name, "namespace": "default"},
            "spec": spec,
        }
        try:
            api.create_namespaced_custom_object("wayline.dev", "v1alpha1", "default", plural, body)
        except kubernetes.client.ApiException as refused:
            if refused.status == 404 and time.monotonic() < deadline:  # not established yet
                time.sleep(0.3)
                continue
            assert refused.status == 422, refused.body
            gone = plane.kubectl("get", plural, name, "-n", "default")
            assert gone.returncode != 0 and "NotFound" in gone.stderr
            message: str = json.loads(refused.body)["message"]
            return message
        plane.kubectl("delete", plural, name, "-n", "default", "--wait=false")
        assert time.monotonic() < deadline, f"a {kind} with {sorted(spec)} was created"
        time.sleep(0.3)


def test_a_workflowhook_with_an_unknown_field_is_refused(
    control_plane: Any,
    crd_applied: None,  # noqa: F811
) -> None:
    """``payloads:`` for ``payload:`` had its payload pruned, and null was delivered."""
    spec = {"token": "t", "payloads": {"approved": True}}
    message = _refused_by_the_python_client(control_plane, "WorkflowHook", spec)
    assert "unknown field(s) in spec: payloads" in message, message


@pytest.mark.parametrize(
    ("typo", "value"),
    [("inputs", [4]), ("timezone", "Europe/Berlin"), ("suspended", True)],
)
def test_the_python_client_cannot_create_a_workflowschedule_with_an_unknown_field(
    control_plane: Any,
    crd_applied: None,  # noqa: F811
    typo: str,
    value: Any,
) -> None:
    """``inputs:`` for ``input:`` was pruned, and every tick started its run with no input;
    ``timezone:`` ticked in UTC; ``suspended: true`` ticked on."""
    spec = {"schedule": "* * * * *", "workflow": "chain", typo: value}
    message = _refused_by_the_python_client(control_plane, "WorkflowSchedule", spec)
    assert f"unknown field(s) in spec: {typo}" in message, message
