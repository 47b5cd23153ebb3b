"""Which resources this operator owns, so that two installations on one cluster never start
each other's runs (docs/operator.md, "Several installations on one cluster").

Every operator has an instance id (``--instance``, ``WAYLINE_OPERATOR_INSTANCE``; the chart
gives the release's ``<namespace>.<name>``). A resource is owned by exactly one operator:

- labelled ``wayline.dev/instance: ID``: by the operator whose instance is ``ID``, wherever it
  watches, and by no other;
- unlabelled: by the namespaced operator (``--namespace``) that watches its namespace. A
  cluster-wide operator never takes an unlabelled resource: it cannot know that no
  namespaced operator serves that namespace, and taking one is how a default installation
  used to start another release's runs in its own world, where no worker served them.

No resource carries a finalizer of this version. Earlier ones put an instance's own
(``finalizer_for``) on a waiting WorkflowHook and a WorkflowSchedule: kopf, configured with that
name, takes it off every resource the instance's operator sees (``handlers.configure``).
"""

from __future__ import annotations

import hashlib
import re
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

LABEL = "wayline.dev/instance"
"""The label that names a resource's owning operator instance."""

DEFAULT_INSTANCE = "default"
"""The instance of an operator started without ``--instance``."""

LEGACY_FINALIZER = "wayline.dev/finalizer"
"""The one finalizer every operator shared before instances: taken off by the resource's owner
(``kube.release_legacy``), so a resource created under an earlier version can be deleted."""

_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


def instance_arg(text: str) -> str:
    """``--instance`` (argparse ``type=``): a label value, as the label that names it is one."""
    if not text or len(text) > 63 or not _LABEL_VALUE.match(text):
        import argparse

        raise argparse.ArgumentTypeError(
            f"{text!r} is not a label value (1-63 letters, digits, '-', '_' or '.', "
            "beginning and ending with a letter or digit)"
        )
    return text


def finalizer_for(instance: str) -> str:
    """The finalizer earlier versions gave this instance (a digest: an instance id may be too
    long for a name); kopf's, which this version puts on no resource."""
    return f"wayline.dev/finalizer-{hashlib.sha256(instance.encode()).hexdigest()[:12]}"


def world_name(url: str) -> str:
    """The world a URL names, without what it may carry of credentials: the scheme, the hosts
    (or the SQLite path) and a NATS ``prefix``. Recorded in a run's status beside the instance
    so that a person sees which world holds it."""
    parts = urllib.parse.urlsplit(url)
    hosts = parts.netloc.rpartition("@")[2]
    prefix = urllib.parse.parse_qs(parts.query).get("prefix")
    tail = f"?prefix={prefix[0]}" if prefix else ""
    return f"{parts.scheme}://{hosts}{parts.path}{tail}"


@dataclass(frozen=True)
class Ownership:
    instance: str = DEFAULT_INSTANCE
    namespaced: bool = False
    """Whether the operator watches listed namespaces (``--namespace``) rather than all."""

    def owns(self, body: Mapping[str, Any]) -> bool:
        labels = (body.get("metadata") or {}).get("labels") or {}
        label = labels.get(LABEL)
        if label is not None:
            return bool(label == self.instance)
        return self.namespaced

    @property
    def finalizer(self) -> str:
        return finalizer_for(self.instance)


_CURRENT = [Ownership()]


def configure(ownership: Ownership) -> None:
    """Set once by the entry point, before kopf runs the handlers that read it."""
    _CURRENT[0] = ownership


def current() -> Ownership:
    return _CURRENT[0]
