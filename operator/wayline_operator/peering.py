"""What two or more operator replicas need from the cluster: kopf's peering CRDs
(``kopf.dev`` KopfPeering and ClusterKopfPeering, checked in as ``crds/kopf-peering.json``),
the peering object they share, and the RBAC rules for it.

A replica started with ``--peering NAME`` renews its entry in that object every few seconds;
the highest priority works, the others pause; an entry not renewed for its lifetime is
presumed dead and the next replica resumes (docs/operator.md, "High availability").
"""

from __future__ import annotations

from typing import Any

GROUP = "kopf.dev"
DEFAULT_NAME = "wayline"


def _crd(kind: str, plural: str, scope: str) -> dict[str, Any]:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{GROUP}"},
        "spec": {
            "group": GROUP,
            "scope": scope,
            "names": {"kind": kind, "plural": plural, "singular": plural[:-1]},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "description": "Operator replicas that share the work: each "
                            "renews its entry in status; the highest priority works.",
                            "properties": {
                                "status": {
                                    "type": "object",
                                    "x-kubernetes-preserve-unknown-fields": True,
                                }
                            },
                        }
                    },
                    "additionalPrinterColumns": [
                        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}
                    ],
                }
            ],
        },
    }


def peering_crds() -> dict[str, Any]:
    """Both peering CRDs as one ``List`` (``kubectl apply -f`` and Helm take it as is)."""
    return {
        "apiVersion": "v1",
        "kind": "List",
        "items": [
            _crd("ClusterKopfPeering", "clusterkopfpeerings", "Cluster"),
            _crd("KopfPeering", "kopfpeerings", "Namespaced"),
        ],
    }


def peering_object(name: str = DEFAULT_NAME, namespace: str | None = None) -> dict[str, Any]:
    """The peering object the replicas share: cluster-wide when the operator watches every
    namespace, else one KopfPeering in each watched namespace."""
    if namespace is None:
        return {
            "apiVersion": f"{GROUP}/v1",
            "kind": "ClusterKopfPeering",
            "metadata": {"name": name},
        }
    return {
        "apiVersion": f"{GROUP}/v1",
        "kind": "KopfPeering",
        "metadata": {"name": name, "namespace": namespace},
    }


RBAC_RULES: list[dict[str, Any]] = [
    {
        "apiGroups": [GROUP],
        "resources": ["clusterkopfpeerings", "kopfpeerings"],
        "verbs": ["get", "list", "watch", "patch"],
    },
]
"""The rules the operator's role needs on top of its own, for peering (a namespaced Role may
hold the ``kopfpeerings`` one alone when namespaces are listed)."""


class Gate:
    """Whether kopf's peering has paused this replica: the operator's own loops (the status
    pump, the sweep) work only while it is active, as kopf's handlers do.

    kopf keeps its pause in a toggle per peering object (``conflicts_found``) that it hands to
    ``process_peering_event`` and to nothing public; :func:`follow_kopf` wraps that function to
    learn the toggles, whose state is then read live. Before kopf has looked at its peers a
    replica with mandatory peering is paused (kopf starts it so too); a standalone one never is.
    """

    def __init__(self, mandatory: bool = False) -> None:
        self.mandatory = mandatory
        self._toggles: list[Any] = []

    def learn(self, toggle: Any) -> None:
        if toggle is not None and all(t is not toggle for t in self._toggles):
            self._toggles.append(toggle)

    @property
    def paused(self) -> bool:
        if not self._toggles:
            return self.mandatory
        return any(t.is_on() for t in self._toggles)


GATE = Gate()
"""This process's gate (standalone until :func:`follow_kopf` says otherwise)."""


def follow_kopf(gate: Gate = GATE) -> None:
    """Make ``gate`` follow kopf's peering pause; call once, before ``kopf.operator``.

    kopf looks ``peering.process_peering_event`` up on its module each time it spawns a
    peering watcher (``orchestration.spawn_missing_peerings``), so wrapping the module
    attribute is enough. Raises ``RuntimeError`` if this kopf has no such function (a new
    kopf that moved it): better than a standby that pumps statuses beside the active one.
    """
    from kopf._core.engines import peering as kopf_peering

    original = getattr(kopf_peering, "process_peering_event", None)
    if original is None:
        raise RuntimeError("kopf has no peering.process_peering_event: cannot follow peering")
    if getattr(original, "wayline_gate", None) is not None:
        return  # wrapped already (the operator started twice in one process: tests)
    gate.mandatory = True

    async def process_peering_event(*args: Any, **kwargs: Any) -> None:
        gate.learn(kwargs.get("conflicts_found"))
        await original(*args, **kwargs)

    process_peering_event.wayline_gate = gate  # type: ignore[attr-defined]
    kopf_peering.process_peering_event = process_peering_event
