"""Child runs (seed 004): claimed by the parent, repaired on replay, reported back."""

from __future__ import annotations

import logging

from .._core.events import EventType, NewEvent
from .._core.replay import ChildRecord, Replay
from ..errors import CorruptLogError, EntityConflictError, SequenceConflictError
from ..world import FLOW_TOPIC, World
from .ending import report_to_parent
from .session import RunSession

log = logging.getLogger("wayline.runtime")


async def start_child(world: World, replay: Replay, child: ChildRecord) -> None:
    """Create the claimed child and send its start. A child of a run started on a queue is on
    that queue (as a Temporal child's task queue defaults to its parent's): the workers that
    serve the parent's queue serve it."""
    assert child.run_id is not None
    data = {
        "workflow": child.workflow.name,
        "input": child.input,
        "revision": child.workflow.revision,
        "parent": {"runId": replay.run_id, "cid": child.cid},
    }
    if replay.queue is not None:
        data["queue"] = replay.queue
    try:
        await world.append(
            child.run_id, [NewEvent(EventType.RUN_CREATED, data=data)], expected_seq=0
        )
    except (EntityConflictError, SequenceConflictError):
        pass  # a previous delivery created it already
    await world.enqueue(
        FLOW_TOPIC,
        {"runId": child.run_id, "reason": "start"},
        idempotency_key=f"{child.run_id}:start",
    )


async def sync_children(session: RunSession) -> None:
    """Repair both crash windows of a child: claimed but never created, and ended but
    never reported to this parent."""
    world, replay = session.world, session.replay
    for child in replay.pending_children():
        assert child.run_id is not None
        try:
            info = await world.get_run(child.run_id)
        except CorruptLogError as err:
            # the child's fence is the child's: the parent's delivery goes on and the parent
            # waits for the child (its repair wakes the parent, see ``Client.repair_run``);
            # setting the parent's message aside lost its cancel, its timers, its hooks
            log.warning("run %s: child run %s does not read: %s", replay.run_id, child.run_id, err)
            continue
        if info is None:
            await start_child(world, replay, child)
        elif info.status.terminal:
            await report_to_parent(world, info)
    if replay.pending_children():
        await session.catch_up()
