"""The Deployment of a ``WorkflowWorker``'s version: its manifest and labels (the apps/v1 calls
are in ``kube``)."""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Mapping
from typing import Any

from .resource import GROUP, VERSION
from .worker_resource import WORKER_KIND, WorkflowWorkerSpec

OWNER_LABEL = "wayline.dev/workflowworker"
"""The uid of the WorkflowWorker a Deployment is a version of (a uid, not the name: a name
may be longer than a label value's 63 characters)."""
VERSION_LABEL = "wayline.dev/worker-version"
VERSION_ENV = "WAYLINE_WORKER_VERSION"
DRAINING_ENV = "WAYLINE_WORKER_DRAINING"
"""Set to ``1`` in the pods of every version that is not the current one: their workers drive
the runs pinned to them but take no new run, so new runs go to the current version only."""
TEMPLATE_ANNOTATION = "wayline.dev/template-hash"
"""A hash of the pod template the operator last wrote: a change of what is not part of the
version (resources, probes, volumes) is written over the current version's Deployment, which
then rolls its pods in place."""


def draining_template(template: Mapping[str, Any]) -> dict[str, Any]:
    """``template`` (a version's pod template) with its ``worker`` container draining."""
    out: dict[str, Any] = copy.deepcopy(dict(template))
    for container in (out.get("spec") or {}).get("containers") or []:
        if container.get("name") == "worker":
            env = [e for e in container.get("env") or [] if e.get("name") != DRAINING_ENV]
            container["env"] = [*env, {"name": DRAINING_ENV, "value": "1"}]
    return out


def is_draining(template: Mapping[str, Any]) -> bool:
    """Whether a version's pod template has its ``worker`` container draining."""
    return any(
        e.get("name") == DRAINING_ENV and e.get("value") == "1"
        for c in (template.get("spec") or {}).get("containers") or []
        if c.get("name") == "worker"
        for e in c.get("env") or []
    )


def template_hash(made: Mapping[str, Any]) -> str:
    """The hash of a Deployment's pod template, as ``deployment`` makes it."""
    text = json.dumps(made["spec"]["template"], sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def deployment_name(worker: str, version: str) -> str:
    return f"{worker}-{version}"


def deployment(
    body: Mapping[str, Any], spec: WorkflowWorkerSpec, version: str, replicas: int
) -> dict[str, Any]:
    """The version's Deployment: ``spec.template`` with its ``worker`` container given the
    image, one ``--app`` per app, the spec's env and the version (so its workers' registry
    entries name it), owned by the WorkflowWorker so a delete of it takes every version."""
    meta = body["metadata"]
    labels = {OWNER_LABEL: str(meta["uid"]), VERSION_LABEL: version}
    template: dict[str, Any] = copy.deepcopy(spec.template or {})
    template_meta = template.setdefault("metadata", {})
    template_meta["labels"] = {**(template_meta.get("labels") or {}), **labels}
    pod = template.setdefault("spec", {})
    containers: list[dict[str, Any]] = pod.setdefault("containers", [])
    container = next((c for c in containers if c.get("name") == "worker"), None)
    if container is None:
        container = {"name": "worker", "command": ["wayline", "worker"]}
        containers.insert(0, container)
    container["image"] = spec.image
    if spec.imagePullPolicy:
        container["imagePullPolicy"] = spec.imagePullPolicy
    own = [a for a in container.get("args") or [] if not str(a).startswith("--app=")]
    container["args"] = [f"--app={app}" for app in spec.apps] + own
    # The operator alone says which version drains (``draining_template``): the version the
    # spec describes is the current one, and a current version that drained would leave every
    # new run waiting.
    ours = {*spec.env, VERSION_ENV, DRAINING_ENV}
    env = [e for e in container.get("env") or [] if e.get("name") not in ours]
    env += [{"name": k, "value": v} for k, v in sorted(spec.env.items()) if k != DRAINING_ENV]
    container["env"] = [*env, {"name": VERSION_ENV, "value": version}]
    if spec.resources is not None:
        container["resources"] = spec.resources
    made: dict[str, Any] = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": deployment_name(str(meta["name"]), version),
            "namespace": meta["namespace"],
            "labels": {**(template_meta["labels"]), **labels},
            "ownerReferences": [
                {
                    "apiVersion": f"{GROUP}/{VERSION}",
                    "kind": WORKER_KIND,
                    "name": meta["name"],
                    "uid": meta["uid"],
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            # a new pod is ready (connected and consuming) before an old one gets SIGTERM
            "strategy": {
                "type": "RollingUpdate",
                "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0},
            },
            "template": template,
        },
    }
    made["metadata"]["annotations"] = {TEMPLATE_ANNOTATION: template_hash(made)}
    return made
