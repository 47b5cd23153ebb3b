"""Child runs (seed 004): claimed by the parent, repaired on replay, reported back, and
terminated with a parent that ended without waiting for them (by request, or failed by a
worker that could not drive it), also when they start after that end."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping

from .._core import ordering
from .._core.events import Event, EventType, NewEvent, RunStatus
from .._core.messages import WakeReason
from .._core.replay import ChildRecord, Replay
from .._core.search_attributes import SEARCH_KEY
from ..errors import (
    CorruptLogError,
    EntityConflictError,
    RunTerminalError,
    SequenceConflictError,
)
from ..world import FLOW_TOPIC, RunInfo, World, flow_message
from ..world.sending import send
from . import child_ids
from .ending import report_to_parent
from .session import RunSession

log = logging.getLogger("wayline.runtime")


async def start_child(world: World, replay: Replay, child: ChildRecord) -> None:
    """Create the claimed child and send its start. A child of a run started on a queue is on
    that queue (as a Temporal child's task queue defaults to its parent's): the workers that
    serve the parent's queue serve it. A child is in its parent's namespace too."""
    assert child.run_id is not None
    data = {
        "workflow": child.workflow.name,
        "input": child.input,
        "revision": child.workflow.revision,
        "parent": {"runId": replay.run_id, "cid": child.cid},
    }
    if replay.queue is not None:
        data["queue"] = replay.queue
    if replay.namespace is not None:  # whose hooks a namespace's WorkflowHooks answer
        data["namespace"] = replay.namespace
    if child.business_id is not None:
        data["businessId"] = child.business_id
    # its parent's, as its queue is, unless ChildOptions(priority=) gave its own
    order = replay.ordering
    if child.priority is not None:
        order = dataclasses.replace(order, priority=child.priority)
    data.update(ordering.record_fields(order))
    if child.workflow.attributes:  # its definition's, as a start by a client gives them
        data[SEARCH_KEY] = dict(child.workflow.attributes)
    created = True
    try:
        await world.append(
            child.run_id, [NewEvent(EventType.RUN_CREATED, data=data)], expected_seq=0
        )
    except (EntityConflictError, SequenceConflictError):
        if await child_ids.refuse(world, replay, child):
            return  # another start took the business id's generation first
        created = False  # a previous delivery created it already
    start = flow_message(world, child.run_id, WakeReason.START, after_own_append=created)
    start.update(order.fields())
    await send(world, FLOW_TOPIC, start, idempotency_key=f"{child.run_id}:start")


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


async def ended_with_its_parent(world: World, info: RunInfo) -> bool:
    """Terminate a child that has not started yet when its parent was ended by request
    (``Client.terminate`` / ``Client.fail``); True when it is ended here (or ended already).

    A parent claims a child in its log (``child_created``) before the child's ``run_created``
    is written (``start_child``). A parent ended by request in between finds no child run to
    terminate (``terminate_children``), and the child created after would run with
    nobody to stop it. The parent's end is written before its children are read, and the
    child is created before its first delivery: so a child that request did not reach is one
    whose first delivery reads its parent ended. Costs one read of the parent, on a child's
    deliveries before its ``run_started`` only."""
    parent = info.attributes.get("parent")
    if info.started_at is not None or not isinstance(parent, Mapping) or not parent.get("runId"):
        return False
    parent_id = str(parent["runId"])
    try:
        ended = await world.get_run(parent_id)
        if ended is None or ended.status not in (RunStatus.CANCELLED, RunStatus.FAILED):
            return False  # live, completed (a child may outlive it), or gone (an orphan runs)
        last = await world.list_events(parent_id, after_seq=ended.last_seq - 1)
    except CorruptLogError as err:  # the parent's fence is the parent's: the child goes on
        log.warning("run %s: its parent run %s does not read: %s", info.run_id, parent_id, err)
        return False
    how = _ended_by_request(last[-1]) if last else None
    if how is None:  # a cancel unwound it: the unwind asked this child to cancel already
        return False
    reason = f"its parent run {parent_id} was {how}"
    end = NewEvent(EventType.RUN_CANCELLED, data={"reason": reason, "terminated": True})
    try:
        await world.append(info.run_id, [end])
    except (RunTerminalError, EntityConflictError):
        return True  # ended meanwhile (the request reached it after all)
    log.info(
        "run %s terminated before it started: %s",
        info.run_id,
        reason,
        extra={"run_id": info.run_id, "workflow": info.workflow},
    )
    return True


def _ended_by_request(event: Event) -> str | None:
    """How a run's terminal event says it ended without waiting for its children: as
    ``Client.terminate`` and ``Client.fail`` write it, or ``fail_run(by="worker")``."""
    if event.type is EventType.RUN_CANCELLED and event.data.get("terminated") is True:
        return "terminated"
    if event.type is EventType.RUN_FAILED and event.data.get("by") in ("client", "worker"):
        return "failed"
    return None
