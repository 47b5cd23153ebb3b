"""Child runs (seed 004): claimed by the parent, repaired on replay, reported back."""

from __future__ import annotations

from .._core.events import EventType, NewEvent
from .._core.replay import ChildRecord, Replay
from ..errors import EntityConflictError, SequenceConflictError
from ..world import FLOW_TOPIC, World
from .ending import report_to_parent
from .session import RunSession


async def start_child(world: World, replay: Replay, child: ChildRecord) -> None:
    assert child.run_id is not None
    try:
        await world.append(
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
        info = await world.get_run(child.run_id)
        if info is None:
            await start_child(world, replay, child)
        elif info.status.terminal:
            await report_to_parent(world, info)
    if replay.pending_children():
        await session.catch_up()
