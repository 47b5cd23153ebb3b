"""Which workers serve what: each worker records, every heartbeat, the workflows it serves
(name, definition identity, revision, queue; the code hash too under ``strict_identity``) with
a time until which it is alive. The world keeps one entry per definition served (not per
worker, so the record stays bounded through any number of pod restarts) and never forgets
one: "no worker has ever served X" stays a fact a start can refuse on, and "no live worker
serves this run" is what a run that waits silently shows (``waiting_for_worker``).

An entry also lists its live workers (``workers``: worker id to its ``liveUntil``; lapsed
ones are dropped at each write, so it stays as small as the live set), and its own
``liveUntil`` is the latest of theirs: a worker closed gracefully withdraws itself at once
(``withdrawn_entries``) without hiding another worker that still serves the definition."""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TypeGuard

from .._core.definitions import WorkflowDefinition
from .._core.projections import RunInfo
from . import entries
from .routing import FLOW_TOPIC, STEP_TOPIC, pin_of, routed


def served_entries(
    workflows: Iterable[WorkflowDefinition[..., Any]],
    queue: str | None,
    worker: str,
    live_for: float,
    now: float | None = None,
    version: str | None = None,
    draining: bool = False,
    held: int | None = None,
) -> list[dict[str, Any]]:
    """``now``: the world's time (``World.now``), which every reader compares with; a
    worker's own clock minutes off the server's would make it look dead, or alive too long.
    ``version``: the WorkflowWorker version the worker belongs to (``versions`` of the stored
    entry maps each live worker to its version). ``draining``: the worker takes no new run
    (``routing.served_topics``); ``drainingWorkers`` of the stored entry lists such live
    workers, so a new run they leave says it waits for a worker. ``held``: how many deliveries
    the worker holds now (bodies and steps under way); ``heldBy`` of the stored entry maps each
    live worker that said so to its count (``held_by_worker``), which is what the operator
    orders a version's pods by before it scales them down (docs/operator.md)."""
    now = time.time() if now is None else now
    return [
        {
            "key": _key(w, identity, queue),
            "workflow": w.name,
            "identity": identity,
            "revision": w.revision,
            # under strict identity the code is part of the route (``routing.pin_of``): a
            # worker of other code never receives the run, so it must not count as serving it
            **({"codeHash": w.code_hash} if w.strict_identity else {}),
            "queue": queue,
            "worker": worker,
            "seenAt": now,
            "liveUntil": now + live_for,
            **({"version": version} if version else {}),
            **({"draining": True} if draining else {}),
            **({"held": held} if held is not None else {}),
            # a debounced workflow's key is a function of its code: a start by name (the
            # operator's, for a WorkflowRun) cannot compute it, and is refused (``debounced``)
            **({"debounced": True} if w.debounce is not None else {}),
        }
        for w in workflows
        # one entry per identity it drives: an older one it still serves (a run pinned before
        # a ``patched`` step) must count as served, or the run would say waiting_for_worker
        for identity in w.identities
    ]


def _key(w: WorkflowDefinition[..., Any], identity: str, queue: str | None) -> str:
    key = f"{queue or ''}|{w.name}|{identity}|{w.revision}"
    return f"{key}|{w.code_hash}" if w.strict_identity else key


def withdrawn_entries(
    workflows: Iterable[WorkflowDefinition[..., Any]],
    queue: str | None,
    worker: str,
    now: float | None = None,
) -> list[dict[str, Any]]:
    """What a worker closed gracefully records: its entries, live until now (so no longer)."""
    now = time.time() if now is None else now
    return [
        {**e, "liveUntil": now, "withdrawn": True}
        for e in served_entries(workflows, queue, worker, 0.0, now)
    ]


def merge_served(
    stored: Mapping[str, Any] | None, entry: Mapping[str, Any], now: float | None = None
) -> dict[str, Any] | None:
    """The entry to store when ``entry`` (a heartbeat, or a withdrawal) meets ``stored`` (the
    entry kept under the same key, None when there is none). None: nothing to write (a
    withdrawal of an entry never recorded)."""
    now = time.time() if now is None else now
    workers: dict[str, float] = {}
    if stored is not None:
        listed = stored.get("workers")
        if _is_map(listed):
            items = list(listed.items())
        else:  # an entry written before ``workers``: its last writer alone
            items = [(stored.get("worker"), stored.get("liveUntil", 0))]
        for wid, until in items:
            seconds = entries.seconds(until)
            if isinstance(wid, str) and seconds is not None and seconds >= now:
                workers[wid] = seconds
    wid = str(entry.get("worker"))
    until = float(entry.get("liveUntil", 0))
    withdrawn = bool(entry.get("withdrawn"))
    if withdrawn:
        workers.pop(wid, None)
        if stored is None:
            return None
    else:
        workers[wid] = until
    out = {k: v for k, v in entry.items() if k not in ("withdrawn", "version", "draining", "held")}
    versions = _versions(stored, workers)
    version = entry.get("version")
    if isinstance(version, str) and wid in workers:
        versions[wid] = version
    if not versions and _is_map((stored or {}).get("versions")):
        # No live worker of a version is left (a version retired or scaled away): the last
        # ones are kept, so a run left waiting can say which version served it
        # (``waiting_for_worker``); they are not live, so nobody counts them as serving.
        versions = dict((stored or {})["versions"])
    if versions:
        out["versions"] = versions
    listed = (stored or {}).get("drainingWorkers")
    draining = {w for w in listed if w in workers} if isinstance(listed, list) else set()
    # A worker's own heartbeat says whether it drains now (a restarted pod may not).
    draining.discard(wid)
    if entry.get("draining") and wid in workers:
        draining.add(wid)
    if draining:
        out["drainingWorkers"] = sorted(draining)
    held = _held(stored, workers)
    # A worker's own heartbeat says how much it holds now; one without the field (a worker of
    # an earlier release) leaves its count unknown rather than keeping a stale one.
    held.pop(wid, None)
    count = entry.get("held")
    if isinstance(count, int) and not isinstance(count, bool) and count >= 0 and wid in workers:
        held[wid] = count
    if held:
        out["heldBy"] = held
    if workers:
        last = max(workers, key=lambda w: workers[w])
        out["worker"], out["liveUntil"] = last, workers[last]
    else:
        out["liveUntil"] = min(until, now)
    out["workers"] = workers
    return out


def _is_map(value: object) -> TypeGuard[Mapping[Any, Any]]:
    """``isinstance(value, Mapping)``, with a dict (what every world decodes) answered without
    the ABC's slower check: a heartbeat merges every entry a worker serves."""
    return type(value) is dict or isinstance(value, Mapping)


def _versions(stored: Mapping[str, Any] | None, workers: Mapping[str, float]) -> dict[str, str]:
    """The stored entry's worker versions, of the workers still live only, so the map stays
    as small as the live set."""
    listed = (stored or {}).get("versions")
    if not _is_map(listed):
        return {}
    return {w: v for w, v in listed.items() if w in workers and isinstance(v, str)}


def _held(stored: Mapping[str, Any] | None, workers: Mapping[str, float]) -> dict[str, int]:
    """The stored entry's held counts, of the workers still live only."""
    listed = (stored or {}).get("heldBy")
    if not _is_map(listed):
        return {}
    return {
        w: n
        for w, n in listed.items()
        if w in workers and isinstance(n, int) and not isinstance(n, bool) and n >= 0
    }


def held_by_worker(
    served: Sequence[Mapping[str, Any]], now: float | None = None
) -> dict[str, int | None]:
    """Each live worker (its id, ``hostname:pid:uuid``) with how many deliveries it held at
    its last heartbeat, or None when its heartbeats do not say (a worker of an earlier
    release, or an entry written by one): unknown, not idle. A worker heartbeats the same
    count into every entry it serves, so any of them tells; the largest is taken should two
    heartbeats of it straddle a read."""
    now = time.time() if now is None else now
    out: dict[str, int | None] = {}
    for e in served:
        workers, listed = e.get("workers"), e.get("heldBy")
        if not isinstance(workers, Mapping):
            continue
        counts = listed if isinstance(listed, Mapping) else {}
        for wid, until in workers.items():
            seconds = entries.seconds(until)
            if not isinstance(wid, str) or seconds is None or seconds < now:
                continue
            count = counts.get(wid)
            if not isinstance(count, int) or isinstance(count, bool):
                out.setdefault(wid, None)
            else:
                known = out.get(wid)
                out[wid] = count if known is None else max(known, count)
    return out


def _by_version(
    served: Sequence[Mapping[str, Any]], now: float | None
) -> Iterable[tuple[str, Mapping[str, Any]]]:
    """Each entry with each WorkflowWorker version one of its live workers belongs to."""
    now = time.time() if now is None else now
    for e in served:
        workers, versions = e.get("workers"), e.get("versions")
        if not isinstance(workers, Mapping) or not isinstance(versions, Mapping):
            continue
        live = set()
        for wid, version in versions.items():
            until = entries.seconds(workers.get(wid))
            if isinstance(version, str) and until is not None and until >= now:
                live.add(version)
        for version in live:
            yield version, e


def version_identities(
    served: Sequence[Mapping[str, Any]], now: float | None = None
) -> dict[str, set[str]]:
    """The definition identities each WorkflowWorker version serves, by version, from the
    entries' live workers (a version none of whose workers is live is absent)."""
    out: dict[str, set[str]] = {}
    for version, e in _by_version(served, now):
        if isinstance(e.get("identity"), str):
            out.setdefault(version, set()).add(e["identity"])
    return out


def version_topics(
    served: Sequence[Mapping[str, Any]], version: str, now: float | None = None
) -> list[str]:
    """The topics the live workers of ``version`` consume runs from (``routing``): per
    definition, the route of its pinned runs and the one of its runs not pinned yet, for flow
    and step messages; a queue worker's queue routes instead."""
    topics: set[str] = set()
    for found, e in _by_version(served, now):
        if found != version or not isinstance(e.get("workflow"), str):
            continue
        queue = e.get("queue") or None
        record = {
            "identity": e.get("identity"),
            "revision": e.get("revision"),
            "strictIdentity": "codeHash" in e,
            "codeHash": e.get("codeHash"),
        }
        for topic in (FLOW_TOPIC, STEP_TOPIC):
            topics.add(routed(topic, e["workflow"], queue, pin_of(record)))
            topics.add(routed(topic, e["workflow"], queue))
    return sorted(topics)


def _takes_new_runs(e: Mapping[str, Any], now: float) -> bool:
    """Whether a live worker of entry ``e`` takes runs not pinned yet (one not draining)."""
    draining, workers = e.get("drainingWorkers"), e.get("workers")
    if not isinstance(draining, list) or not draining or not isinstance(workers, Mapping):
        return True
    return any(
        w not in draining and (entries.seconds(until) or 0.0) >= now for w, until in workers.items()
    )


def readable(value: Any) -> dict[str, Any] | None:
    """A stored entry as the readers below take it, or None for what is not one (anyone can
    write into a NATS bucket): a mapping whose ``liveUntil`` is a finite number."""
    if not isinstance(value, dict):
        return None
    return value if entries.seconds(value.get("liveUntil")) is not None else None


def ever_served(name: str, served: Sequence[Mapping[str, Any]]) -> bool:
    return any(e.get("workflow") == name for e in served)


def live_served(name: str, served: Sequence[Mapping[str, Any]], now: float | None = None) -> bool:
    """Whether a live worker (its heartbeat's ``liveUntil`` not past) serves ``name``."""
    now = time.time() if now is None else now
    return any(e.get("workflow") == name and float(e.get("liveUntil", 0)) >= now for e in served)


def debounced(name: str, served: Sequence[Mapping[str, Any]], now: float | None = None) -> bool:
    """Whether workflow ``name`` has a ``wayline.Debounce``: as a live worker serves it or,
    with none live, as the worker that served it last did. A version scaled to zero (or not
    up yet after a restart) has no live worker, and its workflow is no less debounced for it;
    the registry keeps the entries of workers gone, so the last one still says."""
    now = time.time() if now is None else now
    mine = [e for e in served if e.get("workflow") == name]
    live = [e for e in mine if (entries.seconds(e.get("liveUntil")) or 0.0) >= now]
    if live:
        return any(e.get("debounced") is True for e in live)
    last = max(mine, key=lambda e: entries.seconds(e.get("liveUntil")) or 0.0, default=None)
    return last is not None and last.get("debounced") is True


def waiting_for_worker(
    info: RunInfo, served: Sequence[Mapping[str, Any]], now: float | None = None
) -> str | None:
    """Why no live worker can drive ``info`` (None: one can, or the run has ended)."""
    if info.status.terminal:
        return None
    now = time.time() if now is None else now
    queue = info.attributes.get("queue") or None
    pin = info.attributes.get("definition")
    identity = pin.get("identity") if isinstance(pin, Mapping) else None
    revision = pin.get("revision") if isinstance(pin, Mapping) else None
    code = pin.get("codeHash") if isinstance(pin, Mapping) and pin.get("strictIdentity") else None
    last: set[str] = set()
    draining = False
    for e in served:
        if e.get("workflow") != info.workflow:
            continue
        # A worker consumes its queue's route or, without a queue, the workflow's routes,
        # never both (``routing.served_topics``): a queue worker drives no run started
        # without a queue, a worker without one no run started on a queue.
        if (e.get("queue") or None) != queue:
            continue
        if identity is not None and e.get("identity") != identity:
            continue
        if revision is not None and e.get("revision") != revision:
            continue
        if code is not None and e.get("codeHash") != code:
            continue
        if float(e.get("liveUntil", 0)) >= now:
            if identity is not None or _takes_new_runs(e, now):
                return None
            draining = True
        versions = e.get("versions")
        if identity is not None and isinstance(versions, Mapping):
            last |= {v for v in versions.values() if isinstance(v, str)}
    wanted = f"workflow {info.workflow!r}"
    if identity is not None:
        wanted += f" identity {str(identity)[:12]}"
    if revision is not None:
        wanted += f" revision {revision}"
    if code is not None:
        wanted += f" code {str(code)[:12]}"
    if queue is not None:
        wanted += f" on queue {queue!r}"
    said = f"waiting_for_worker: no live worker serves {wanted}"
    if draining:
        # the run is not pinned yet and every live worker of its workflow drains (an old
        # WorkflowWorker version): it waits for the current version's workers to come up
        said = f"waiting_for_worker: no live worker takes new runs of {wanted} (they drain)"
    if last:
        # the pods of these WorkflowWorker versions served it last: one retired, or scaled
        # away, is what a person looks for (docs/operator.md, "WorkflowWorker")
        said += f" (last served by WorkflowWorker version {', '.join(sorted(last))})"
    return said
