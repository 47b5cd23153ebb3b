"""``spec.inputFrom`` on a real kube-apiserver + etcd, on both worlds: an input too large for
``kubectl apply`` (its last-applied annotation) starts its run from a ConfigMap key, a Secret
key serves as well, and a run whose ConfigMap is not there yet waits for it (a Warning Event)
instead of starting with no input."""

# ruff: noqa: F811 - the fixtures imported from test_workflowrun are parameters here

from __future__ import annotations

import json
from pathlib import Path

import wayline
from tests.operator.test_scale import restart_operator
from tests.operator.test_workflowrun import (  # noqa: F401 - fixtures
    APPS,
    Cluster,
    cluster,
    crd_applied,
)
from tests.runtime.harness import settings

BIG = 300 * 1024  # over the 256 KiB kubectl apply's annotation holds


@wayline.workflow(name="input_from.echo")
async def echo(value: object) -> object:
    return value


WORKFLOWS = [*APPS, echo]


def _from(kind: str, name: str, key: str) -> dict[str, object]:
    return {"workflow": "input_from.echo", "inputFrom": {kind: {"name": name, "key": key}}}


async def test_an_input_too_large_for_kubectl_apply_comes_from_a_configmap(
    cluster: Cluster, tmp_path: Path
) -> None:
    restart_operator(cluster, WAYLINE_MAX_INPUT_BYTES=str(4 * BIG))
    value = {"rows": ["x" * 1024] * (BIG // 1024)}
    inline = cluster.apply("inline", {"workflow": "input_from.echo", "input": value})
    assert inline.returncode != 0 and "Too long" in inline.stderr, inline.stderr
    path = tmp_path / "input.json"
    path.write_text(json.dumps(value))
    cluster.kubectl("create", "configmap", "big", f"--from-file=input.json={path}")
    secret = json.dumps(["from a secret"])
    cluster.kubectl("create", "secret", "generic", "small", f"--from-literal=input={secret}")
    async with wayline.Worker(cluster.world, WORKFLOWS, settings=settings()):
        made = cluster.apply("big", _from("configMapKeyRef", "big", "input.json"))
        assert made.returncode == 0, made.stderr
        status = await cluster.status_when("big", "completed", timeout=60)
        assert await cluster.client.handle(status["runId"]).result(timeout=20) == value
        made = cluster.apply("secret", _from("secretKeyRef", "small", "input"))
        assert made.returncode == 0, made.stderr
        done = await cluster.status_when("secret", "completed", timeout=30)
    assert done["output"] == "from a secret"  # an array is the positional arguments


async def test_a_run_whose_configmap_is_missing_waits_for_it(
    cluster: Cluster, tmp_path: Path
) -> None:
    async with wayline.Worker(cluster.world, WORKFLOWS, settings=settings()):
        made = cluster.apply("later", _from("configMapKeyRef", "later", "input"))
        assert made.returncode == 0, made.stderr
        event = await cluster.event_when("later", "InputNotFound")
        assert "configmap" in event["message"] and "does not exist" in event["message"]
        assert event["type"] == "Warning"
        assert await cluster.client.list_runs() == []  # nothing started with no input
        cluster.kubectl("create", "configmap", "later", '--from-literal=input="at last"')
        done = await cluster.status_when("later", "completed", timeout=30)
    assert done["output"] == "at last"


async def test_input_and_input_from_together_or_neither_ref_are_refused(
    cluster: Cluster,
) -> None:
    both = {**_from("configMapKeyRef", "x", "k"), "input": 1}
    refused = cluster.apply("both", both)
    assert refused.returncode != 0 and "not both" in refused.stderr, refused.stderr
    neither = {"workflow": "input_from.echo", "inputFrom": {}}
    refused = cluster.apply("neither", neither)
    assert refused.returncode != 0 and "name one of" in refused.stderr, refused.stderr
