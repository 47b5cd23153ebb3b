"""Child runs (seed 004): claimed by the parent, repaired on replay, reported back."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from .deferred import append_batch
from .errors import (
    EntityConflictError,
    EntityMissingError,
    RunNotFoundError,
    RunTerminalError,
    SequenceConflictError,
)
from .events import EventType, NewEvent, RunStatus
from .replay import ChildRecord, Replay
from .world import FLOW_TOPIC, RunInfo

if TYPE_CHECKING:
    from .handler import Handler

log = logging.getLogger("wayline.runtime")


async def terminal(h: Handler, run_id: str, event: NewEvent, replay: Replay | None = None) -> None:
    """Append a run's terminal event; a child then reports its end to its parent. With the
    live ``replay``, its provisional events ride in the same write (see ``deferred``)."""
    try:
        if replay is not None:
            await append_batch(h.world, replay, [event])
        else:
            await h.world.append(run_id, [event])
    except (RunTerminalError, RunNotFoundError, EntityConflictError):
        return
    info = await h.world.get_run(run_id)
    if info is not None:
        error = info.error or {}
        log.info(
            "run %s %s%s",
            run_id,
            info.status,
            f": [{error.get('code') or error.get('name')}] {error.get('message')}" if error else "",
            extra={"run_id": run_id, "workflow": info.workflow},
        )
        await report_to_parent(h, info)


async def report_to_parent(h: Handler, info: RunInfo) -> None:
    parent = info.attributes.get("parent")
    if not isinstance(parent, Mapping) or not info.status.terminal:
        return
    data: dict[str, Any] = {"status": str(info.status), "childRunId": info.run_id}
    if info.status is RunStatus.COMPLETED:
        data["output"] = info.output
    else:
        data["error"] = dict(info.error or {})
    try:
        await h.world.append(
            str(parent["runId"]),
            [NewEvent(EventType.CHILD_COMPLETED, str(parent["cid"]), data)],
        )
    except (EntityConflictError, RunTerminalError, RunNotFoundError, EntityMissingError):
        return  # already reported, or the parent is gone (then the child is an orphan)
    await h.world.enqueue(FLOW_TOPIC, {"runId": str(parent["runId"]), "reason": "child"})


async def start_child(h: Handler, replay: Replay, child: ChildRecord) -> None:
    assert child.run_id is not None
    try:
        await h.world.append(
            child.run_id,
            [
                NewEvent(
                    EventType.RUN_CREATED,
                    data={
                        "workflow": child.workflow.name,
                        "input": child.input,
                        "revision": child.workflow.revision,
                        "parent": {"runId": replay.run_id, "cid": child.cid},
                    },
                )
            ],
            expected_seq=0,
        )
    except (EntityConflictError, SequenceConflictError):
        pass  # a previous delivery created it already
    await h.world.enqueue(
        FLOW_TOPIC,
        {"runId": child.run_id, "reason": "start"},
        idempotency_key=f"{child.run_id}:start",
    )


async def sync_children(h: Handler, replay: Replay) -> None:
    """Repair both crash windows of a child: claimed but never created, and ended but
    never reported to this parent."""
    for child in replay.pending_children():
        assert child.run_id is not None
        info = await h.world.get_run(child.run_id)
        if info is None:
            await start_child(h, replay, child)
        elif info.status.terminal:
            await report_to_parent(h, info)
    if replay.pending_children():
        await h._catch_up(replay)
