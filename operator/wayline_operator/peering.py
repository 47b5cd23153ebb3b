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
