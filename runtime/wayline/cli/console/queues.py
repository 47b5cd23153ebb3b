"""The queue lag the workers page shows: how many messages wait, ready, on the routes each
served definition's workers take from, and since when the oldest of them has waited."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ...world import FLOW_TOPIC, STEP_TOPIC, QueueDepth
from ...world.routing import pin_of, routed


def entry_routes(entry: Mapping[str, Any]) -> set[str]:
    """The topics a worker of this registry entry consumes (``routing.served_topics``): its
    queue's; else its pinned definition's and its workflow's unpinned ones, which every worker
    of the workflow shares (a run started by name waits there until a worker pins it)."""
    workflow, queue = str(entry.get("workflow")), entry.get("queue") or None
    topics = (FLOW_TOPIC, STEP_TOPIC)
    if queue:
        return {routed(t, workflow, queue) for t in topics}
    record: dict[str, Any] = {"identity": entry.get("identity"), "revision": entry.get("revision")}
    if entry.get("codeHash"):
        record.update(strictIdentity=True, codeHash=entry["codeHash"])
    pin = pin_of(record)
    return {routed(t, workflow, pin=pin) for t in topics} | {routed(t, workflow) for t in topics}


def with_lag(
    served: Sequence[Mapping[str, Any]], depths: Sequence[QueueDepth] | None
) -> list[dict[str, Any]]:
    """Each entry with ``ready`` (None: the world cannot tell) and ``oldestReadyAt``."""
    by_topic = {d.topic: d for d in depths or ()}
    out = []
    for entry in served:
        mine = [by_topic[t] for t in entry_routes(entry) if t in by_topic]
        ready = None if depths is None else sum(d.ready for d in mine)
        oldest = min((d.oldest_ready_at for d in mine), default=None)
        out.append({**entry, "ready": ready, "oldestReadyAt": oldest})
    return out


def queues_json(depths: Sequence[QueueDepth] | None) -> list[dict[str, Any]] | None:
    if depths is None:
        return None
    return [
        {"topic": d.topic, "ready": d.ready, "oldestReadyAt": d.oldest_ready_at} for d in depths
    ]
