"""The chart's ``console`` section: off by default; on, a Deployment that runs ``wayline
console`` over the world exactly as the workers reach it, in the same locked-down pod, probed
on ``/healthz``, behind a bearer token from a Secret (the chart's, kept across upgrades, or
yours), with a Service, a NetworkPolicy that lets it reach NATS, and an Ingress example in
the NOTES."""

from __future__ import annotations

import base64
import json
import subprocess
import uuid
from pathlib import Path
from typing import Any

from tests.operator import test_chart
from tests.operator.test_chart import helm  # noqa: F401 - the fixture

WORKERS = "workers[0].apps={myapp.flows}"
ON = "console.enabled=true"


def _component(docs: list[dict[str, Any]], component: str) -> list[dict[str, Any]]:
    return [
        d
        for d in docs
        if d.get("metadata", {}).get("labels", {}).get("app.kubernetes.io/component") == component
    ]


def _one(docs: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    [doc] = [d for d in docs if d["kind"] == kind and d["metadata"]["name"] == name]
    return doc


def _pod(docs: list[dict[str, Any]], name: str) -> dict[str, Any]:
    spec: dict[str, Any] = _one(docs, "Deployment", name)["spec"]["template"]["spec"]
    return spec


def _nats_admits(docs: list[dict[str, Any]], component: str) -> bool:
    policy = _one(docs, "NetworkPolicy", "t1-wayline-nats")
    peers = [p for rule in policy["spec"]["ingress"] for p in rule.get("from", [])]
    return any(
        p.get("podSelector", {}).get("matchLabels", {}).get("app.kubernetes.io/component")
        == component
        for p in peers
    )


def test_the_console_is_off_by_default(helm: Path) -> None:  # noqa: F811
    docs = test_chart._render(helm, "ns1", WORKERS)
    assert _component(docs, "console") == []
    assert not _nats_admits(docs, "console")


def test_the_console_runs_over_the_workers_world_in_a_locked_down_probed_pod(
    helm: Path,  # noqa: F811
) -> None:
    docs = test_chart._render(helm, "ns1", WORKERS, ON)
    pod = _pod(docs, "t1-wayline-console")
    worker = _pod(docs, "t1-wayline-worker-default")
    [container] = pod["containers"]
    assert container["command"] == ["wayline", "console"]
    args = container["args"]
    for arg in ("--host=0.0.0.0", "--port=8233", "--reads-need-token", "--read-only"):
        assert arg in args, args
    assert "--token-file=/etc/wayline/console/token" in args
    # the same world, credentials and all, as the workers get it; none of it in the args
    own = ("POD_IP", "WAYLINE_WORKER_VERSION")  # a worker pod's own, not the world's
    assert container["env"] == [e for e in worker["containers"][0]["env"] if e["name"] not in own]
    assert not any("NATS" in a or "nats://" in a for a in args), args
    assert pod["securityContext"] == worker["securityContext"]
    assert container["securityContext"] == worker["containers"][0]["securityContext"]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert pod["automountServiceAccountToken"] is False
    for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
        assert container[probe]["httpGet"] == {"path": "/healthz", "port": "http"}, probe
    assert container["ports"] == [{"name": "http", "containerPort": 8233}]
    assert container["resources"]["limits"]["memory"]

    secret = _one(docs, "Secret", "t1-wayline-console-token")
    token = base64.b64decode(secret["data"]["token"]).decode()
    assert len(token) >= 16  # what `wayline console --token-file` accepts
    [mounted] = [v for v in pod["volumes"] if v["name"] == "token"]
    assert mounted["secret"]["secretName"] == "t1-wayline-console-token"
    assert mounted["secret"]["items"] == [{"key": "token", "path": "token"}]

    service = _one(docs, "Service", "t1-wayline-console")
    assert service["spec"]["type"] == "ClusterIP"
    assert service["spec"]["ports"][0]["port"] == 8233
    assert service["spec"]["ports"][0]["targetPort"] == "http"
    selector = _one(docs, "Deployment", "t1-wayline-console")["spec"]["selector"]["matchLabels"]
    assert service["spec"]["selector"] == selector

    policy = _one(docs, "NetworkPolicy", "t1-wayline-console")
    assert policy["spec"]["podSelector"]["matchLabels"] == selector
    egress = json.dumps(policy["spec"]["egress"])
    assert '"app.kubernetes.io/component": "nats"' in egress and '"port": 4222' in egress
    assert _nats_admits(docs, "console")


def test_the_console_takes_your_secret_and_may_act(helm: Path) -> None:  # noqa: F811
    docs = test_chart._render(
        helm,
        "ns1",
        WORKERS,
        ON,
        "console.auth.secret=my-console",
        "console.auth.key=bearer",
        "console.readOnly=false",
        "console.allowedHosts={wayline.example.com}",
        "console.service.type=NodePort",
    )
    assert [d for d in docs if d["kind"] == "Secret" and "console" in d["metadata"]["name"]] == []
    pod = _pod(docs, "t1-wayline-console")
    [mounted] = [v for v in pod["volumes"] if v["name"] == "token"]
    assert mounted["secret"]["secretName"] == "my-console"
    assert mounted["secret"]["items"] == [{"key": "bearer", "path": "token"}]
    args = pod["containers"][0]["args"]
    assert "--read-only" not in args and "--allowed-host=wayline.example.com" in args
    assert _one(docs, "Service", "t1-wayline-console")["spec"]["type"] == "NodePort"


def test_the_values_schema_refuses_a_bad_console_section(helm: Path) -> None:  # noqa: F811
    for bad, named in (
        ("console.service.type=Ingress", "type"),
        ("console.port=0", "port"),
        ("console.enabled=yes please", "enabled"),
        ("console.tokn=x", "tokn"),
    ):
        error = test_chart._template_error(helm, "--set", WORKERS, "--set", ON, "--set", bad)
        assert named in error, (bad, error)


def test_the_notes_show_the_console_token_and_an_ingress(
    helm: Path,  # noqa: F811
    control_plane: Any,
) -> None:
    text = test_chart.notes(helm, control_plane, WORKERS, ON)
    assert "Service notes-wayline-console, port 8233, read-only" in text
    assert "get secret notes-wayline-console-token -o jsonpath='{.data.token}'" in text
    assert "kind: Ingress" in text and "name: notes-wayline-console" in text
    assert "kind: Ingress" not in test_chart.notes(helm, control_plane, WORKERS)


def test_the_generated_token_is_kept_across_upgrades(
    helm: Path,  # noqa: F811
    control_plane: Any,
) -> None:
    """A real install and upgrade on the API server: the upgrade reads the token back (helm's
    lookup) rather than changing it under the console's users."""
    namespace = f"console-{uuid.uuid4().hex[:8]}"
    assert control_plane.kubectl("create", "namespace", namespace).returncode == 0

    def helm_run(verb: str, *values: str) -> None:
        test_chart.helm_release(helm, control_plane, verb, "cons", namespace, WORKERS, ON, *values)

    def token() -> str:
        got = control_plane.kubectl(
            "-n", namespace, "get", "secret", "cons-wayline-console-token", "-o", "json"
        )
        assert got.returncode == 0, got.stderr
        return str(json.loads(got.stdout)["data"]["token"])

    try:
        helm_run("install")
        first = token()
        helm_run("upgrade", "console.replicas=2")
        assert token() == first
    finally:
        uninstall = ("uninstall", f"--kubeconfig={control_plane.kubeconfig}", "cons")
        subprocess.run(
            [str(helm), *uninstall, "--namespace", namespace],
            capture_output=True,
            timeout=120,
            check=False,
        )
        control_plane.kubectl("delete", "namespace", namespace, "--wait=false")
