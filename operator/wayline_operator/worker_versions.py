"""What a ``WorkflowWorker`` look does, decided by a pure function of what it saw: which
version's Deployment to create, scale or delete, what its status says, which Events to post.

The rule (docs/operator.md, "WorkflowWorker: deploys that never strand a run"): a version is
the hash of what changes the definitions its pods serve (image, apps, env). The spec's version
is the current one; it follows its backlog between its bounds. An old version kept drains: its
pods take no new run. An old version is kept while a
live run is pinned to a definition identity it serves and the current version does not, with
at least one replica and never more than it had; it is deleted when no such run is left. An
old version whose identities were never seen (its pods never reported) is kept, as nothing
says its runs can go elsewhere: ``spec.retire`` deletes it by hand, and a retired version's
runs are listed as blocked, naming it."""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .notices import NORMAL, WARNING, Notice
from .worker_resource import WorkflowWorkerSpec

CURRENT, DRAINING, RETIRED = "Current", "Draining", "Retired"
BLOCKED_SHOWN = 10
"""Run ids a retired version's status row lists (its count says how many there are)."""


def version_of(spec: WorkflowWorkerSpec) -> str:
    """The version a spec describes: a short hash of image, apps and env, the fields that
    change which definitions its pods serve. Resources or probes are not part of it (a change
    of those rolls the current version's pods in place)."""
    served = {"image": spec.image, "apps": spec.apps, "env": spec.env}
    return hashlib.sha256(json.dumps(served, sort_keys=True).encode()).hexdigest()[:10]


@dataclass(frozen=True, slots=True)
class Deployed:
    """A version's Deployment as the API server has it."""

    replicas: int
    ready: int
    draining: bool = False
    """Its pods are told to drain (``deployments.DRAINING_ENV``): they take no new run."""


@dataclass(frozen=True, slots=True)
class LiveRun:
    run_id: str
    identity: str
    """The definition identity the run is pinned to."""


@dataclass(frozen=True, slots=True)
class Seen:
    """What a look found."""

    current: str
    deployed: Mapping[str, Deployed]
    """Each version's Deployment, by version."""
    rows: Mapping[str, Mapping[str, Any]]
    """The status rows written by the look before, by version."""
    serving: Mapping[str, set[str]]
    """The identities each version's live workers serve (``registry.version_identities``)."""
    runs: Sequence[LiveRun]
    backlog: int
    """The current version's ready messages."""
    now: float
    last_scale: float | None
    """When the current version's replicas last changed (the cooldown counts from it)."""
    topics: Sequence[str] = ()
    """The current version's topics (remembered in its row: a version scaled to zero has no
    live worker to say them, and its backlog must bring it back)."""
    in_flight: int = 0
    """The current version's messages its workers hold (delivered, not yet settled): a step
    under way. Scaling below the replicas that hold them would stop those bodies."""
    due_soon: int = 0
    """The current version's delayed messages (a sleeping run's wake, a retry's backoff) that
    fall due within the spec's lead time: the work just ahead, which a version scaled down
    or to zero would take up only after it fell due."""


@dataclass(slots=True)
class Plan:
    create: int | None = None
    """Replicas of the current version's Deployment to create (None: it exists)."""
    scale: dict[str, int] = field(default_factory=dict)
    delete: list[str] = field(default_factory=list)
    drain: list[str] = field(default_factory=list)
    """Old versions kept whose pods must be told to drain (``deployments.draining_template``).
    The current version is never in it: a rollback makes an old version current again, and
    its Deployment is rewritten from the spec, which drains nothing."""
    notices: list[Notice] = field(default_factory=list)
    rows: list[dict[str, Any]] = field(default_factory=list)
    blocked: dict[str, list[str]] = field(default_factory=dict)
    """A retired version's runs that no kept version serves, by version."""
    scaled: bool = False
    """The current version's replicas change (the cooldown starts again)."""


def plan(spec: WorkflowWorkerSpec, seen: Seen) -> Plan:
    out = Plan()
    versions = {seen.current, *seen.deployed, *seen.rows}
    ids = {
        v: set((seen.rows.get(v) or {}).get("identities") or ()) | seen.serving.get(v, set())
        for v in versions
    }
    retired = set(spec.retire) - {seen.current}
    kept = {v for v in versions if v not in retired and (v == seen.current or v in seen.deployed)}
    served_kept = set().union(*(ids[v] for v in kept))
    for version in sorted(versions - {seen.current}):
        before = seen.rows.get(version) or {}
        if version in retired:
            _retired(out, version, before, ids[version], served_kept, seen)
        elif version in seen.deployed:
            _old(spec, out, version, before, ids[version], ids[seen.current], seen)
    _current(spec, out, seen, ids[seen.current])
    return out


def _pinned(identities: set[str], elsewhere: set[str], runs: Sequence[LiveRun]) -> list[str]:
    return [r.run_id for r in runs if r.identity in identities and r.identity not in elsewhere]


def _row(
    version: str, before: Mapping[str, Any], identities: set[str], state: str, **rest: Any
) -> dict[str, Any]:
    return {
        "name": version,
        "image": before.get("image"),
        "identities": sorted(identities),
        "state": state,
        "topics": before.get("topics") or [],
        **rest,
    }


def _old(
    spec: WorkflowWorkerSpec,
    out: Plan,
    version: str,
    before: Mapping[str, Any],
    identities: set[str],
    current: set[str],
    seen: Seen,
) -> None:
    """An old version: kept (at least one replica, never more than it has) while a live run
    is pinned to an identity the current version does not serve, deleted when none is."""
    deployed = seen.deployed[version]
    pinned = _pinned(identities, current, seen.runs)
    # An old version takes no new run from now on, so new runs go to the current version only;
    # until the current version's pods are up, a new start waits for them (waiting_for_worker).
    # Its replicas are kept until the current version's workers have said what they serve.
    settled = bool(identities) and bool(current)
    if settled and not pinned:
        out.delete.append(version)
        out.notices.append(
            Notice(
                NORMAL, "VersionDeleted", f"version {version} deleted: no live run is pinned to it"
            )
        )
        return
    if before.get("state") != DRAINING:
        out.notices.append(
            Notice(
                NORMAL,
                "VersionDraining",
                f"version {version} is kept for its {len(pinned)} live pinned runs"
                if identities
                else f"version {version} is kept: its workers never said what they serve "
                "(spec.retire deletes it)",
            )
        )
    if not deployed.draining:
        out.drain.append(version)
    want = max(1, min(max(deployed.replicas, 1), math.ceil(len(pinned) / spec.backlogPerReplica)))
    if not settled:
        want = max(deployed.replicas, 1)
    if want != deployed.replicas:
        out.scale[version] = want
        out.notices.append(
            Notice(NORMAL, "Scaled", f"version {version}: {deployed.replicas} -> {want} replicas")
        )
    out.rows.append(
        _row(
            version,
            before,
            identities,
            DRAINING,
            pinnedRuns=len(pinned),
            replicas=want,
            readyReplicas=deployed.ready,
        )
    )


def _retired(
    out: Plan,
    version: str,
    before: Mapping[str, Any],
    identities: set[str],
    served_kept: set[str],
    seen: Seen,
) -> None:
    """A retired version: its Deployment goes whatever its runs; the runs no kept version
    serves are blocked, and the row stays while there are any."""
    blocked = _pinned(identities, served_kept, seen.runs)
    if version in seen.deployed:
        out.delete.append(version)
    if before.get("state") != RETIRED and (version in seen.deployed or blocked):
        out.notices.append(
            Notice(
                WARNING if blocked else NORMAL,
                "VersionRetired",
                f"version {version} retired by spec.retire: {len(blocked)} live runs pinned to "
                "it are blocked (no worker serves their definition)",
            )
        )
    if blocked:
        out.blocked[version] = blocked
        out.rows.append(
            _row(
                version,
                before,
                identities,
                RETIRED,
                pinnedRuns=len(blocked),
                replicas=0,
                readyReplicas=0,
                blockedRuns=blocked[:BLOCKED_SHOWN],
            )
        )


def _current(spec: WorkflowWorkerSpec, out: Plan, seen: Seen, identities: set[str]) -> None:
    """The current version follows its load, the ready messages and those its workers hold:
    ceil(load / backlogPerReplica) replicas within its bounds, up at once, down only after the
    cooldown; none while idle when it may scale to zero, and one again for the first message.
    A held message counts as load because a step may run longer than the cooldown: counting
    only the ready backlog would scale the version down, to zero even, under a step in its
    body (the pod stopped would hand the step back to run again from its start). A delayed
    message due within the lead time counts too: a wave of sleeping runs finds its replicas
    up when it falls due, instead of a version scaled to zero waking on its first message."""
    load = seen.backlog + seen.in_flight + seen.due_soon
    floor = spec.minReplicas if spec.scaleToZero else max(1, spec.minReplicas)
    if load > 0:
        floor = max(floor, 1)
    want = min(max(math.ceil(load / spec.backlogPerReplica), floor), spec.maxReplicas)
    want = max(want, floor)
    deployed = seen.deployed.get(seen.current)
    if deployed is None:
        # One pod at least at first, so that its workers say what it serves before an old
        # version can be let go for it.
        out.create = max(want, 1)
        out.scaled = True
        replicas, ready = out.create, 0
        out.notices.append(
            Notice(
                NORMAL,
                "VersionCreated",
                f"version {seen.current} ({spec.image}) created with {out.create} replicas",
            )
        )
    else:
        replicas, ready = deployed.replicas, deployed.ready
        cooled = seen.last_scale is None or seen.now - seen.last_scale >= spec.cooldownSeconds
        if want > replicas or (want < replicas and cooled):
            out.scale[seen.current] = want
            out.scaled = True
            out.notices.append(
                Notice(
                    NORMAL,
                    "Scaled",
                    f"version {seen.current}: {replicas} -> {want} replicas "
                    f"(backlog {seen.backlog}, in flight {seen.in_flight}, "
                    f"due soon {seen.due_soon})",
                )
            )
            replicas = want
    out.rows.insert(
        0,
        {
            "name": seen.current,
            "image": spec.image,
            "identities": sorted(identities),
            "state": CURRENT,
            "pinnedRuns": 0,
            "replicas": replicas,
            "readyReplicas": ready,
            "topics": sorted(seen.topics),
        },
    )
