"""Which pods of a version a scale-down removes first: the ReplicaSet controller removes the
pods with the lowest ``controller.kubernetes.io/pod-deletion-cost`` first (among pods equally
ready), so before the operator scales a version's Deployment down it gives each pod the
deliveries its workers hold as that cost. An idle pod then goes at once; a busy one, which
would drain its bodies on SIGTERM, stays. A pod whose workers' heartbeats say nothing (no
live worker on it yet, or a worker of an earlier release) gets a high cost: nothing says it
is idle, and removing it could cut work that a pod known to be idle would not.

A worker's id is ``hostname:pid:uuid`` and a Deployment's pod has its name as hostname (cut
to the 63 characters a hostname may have), which is how a worker is found on its pod."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

DELETION_COST = "controller.kubernetes.io/pod-deletion-cost"
UNKNOWN_COST = 1_000_000
"""The cost of a pod whose work is unknown: above any count of held deliveries a pod reports
(each is capped just below it), well inside the annotation's 32-bit range."""
HOSTNAME_CHARS = 63
"""The kubelet cuts a pod's hostname to its name's first 63 characters."""


def pod_costs(pods: Iterable[str], held: Mapping[str, int | None]) -> dict[str, int]:
    """The deletion cost of each pod in ``pods`` (by name) from ``held``, each live worker's
    held deliveries by worker id (``Registry.held_deliveries``): the sum over the workers on
    the pod, 0 for an idle one, ``UNKNOWN_COST`` when it has no live worker or one of its
    workers does not say."""
    by_host: dict[str, list[int | None]] = {}
    for worker, count in held.items():
        by_host.setdefault(worker.split(":", 1)[0], []).append(count)
    out: dict[str, int] = {}
    for pod in pods:
        counts = by_host.get(pod[:HOSTNAME_CHARS])
        if not counts or any(c is None for c in counts):
            out[pod] = UNKNOWN_COST
        else:
            out[pod] = min(sum(c for c in counts if c is not None), UNKNOWN_COST - 1)
    return out
