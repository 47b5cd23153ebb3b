"""Children named by a business id (``ChildOptions(id=...)``).

The run id of such a child is the business id's next generation in the parent's namespace
(``world.business_ids``), found when the parent claims the child and recorded in its
``child_created``, so every replay resumes the same run. While a run under the id is live, the
parent claims no new run: the batch records the claim and, with it, the child's failure with
``RUN_ALREADY_EXISTS`` naming that run (Temporal's "workflow already started"); both are in one
write, so the refused claim never counts as a running child of the parent (its cancel or
termination never reaches the other run). A start that wins the same generation between the
look and the child's creation is refused the same way, after the claim (``refuse``).
"""

from __future__ import annotations

from typing import Any

from .._core.events import EventType, NewEvent
from .._core.messages import WakeReason
from .._core.planning import DecisionBatch
from .._core.replay import ChildRecord, Replay
from ..errors import CorruptLogError, EntityConflictError, RunTerminalError
from ..world import FLOW_TOPIC, World, flow_message
from ..world.business_ids import generation_run_id, newest_generation
from ..world.sending import send


async def name_children(world: World, replay: Replay, batch: DecisionBatch) -> list[str]:
    """Give each new child of ``batch`` that has a business id its run id, or its refusal;
    returns the refused children's cids (the parent needs a wake to read its refusal: no
    child will report)."""
    named: list[tuple[ChildRecord, str]] = []
    refused: list[str] = []
    for child, run_id in batch.children:
        if child.business_id is None:
            named.append((child, run_id))
            continue
        fresh, holder = await _next_run(world, child.business_id, replay.namespace)
        at = next(
            i
            for i, e in enumerate(batch.events)
            if e.type is EventType.CHILD_CREATED and e.correlation_id == child.cid
        )
        claim = batch.events[at]
        data = {**claim.data, "childRunId": holder or fresh, "businessId": child.business_id}
        batch.events[at] = NewEvent(claim.type, claim.correlation_id, data)
        if holder is None:
            named.append((child, fresh))
        else:
            error = _already_exists(child.business_id, holder)
            batch.events.append(NewEvent(EventType.CHILD_COMPLETED, child.cid, error))
            refused.append(child.cid)
    batch.children = named
    return refused


async def wake_refused(world: World, replay: Replay, refused: list[str]) -> None:
    """Wake the parent whose batch recorded refused children, to go on past their failure."""
    for cid in refused:
        wake = flow_message(world, replay.run_id, WakeReason.CHILD, after_own_append=True)
        key = f"{replay.run_id}:{cid}:refused"
        await send(world, FLOW_TOPIC, wake, idempotency_key=key)


async def _next_run(
    world: World, business_id: str, namespace: str | None
) -> tuple[str, str | None]:
    """``(run id, None)``: the id's next generation, free to create; ``("", holder)``: the run
    holding the id is live (or does not read, which counts as live: nothing is started over a
    run whose state is unknown)."""
    newest = await newest_generation(world, business_id, namespace)
    if newest < 0:
        return generation_run_id(business_id, namespace, 0), None
    holder = generation_run_id(business_id, namespace, newest)
    try:
        info = await world.get_run(holder)
    except CorruptLogError:
        return "", holder
    if info is None or info.status.terminal:
        return generation_run_id(business_id, namespace, newest + 1), None
    return "", holder


def _already_exists(business_id: str, holder: str) -> dict[str, Any]:
    message = (
        f"a run with id {business_id!r} is live (run {holder}); a child with this id starts "
        "once that run has ended"
    )
    return {
        "status": "failed",
        "childRunId": holder,
        "error": {"code": "RUN_ALREADY_EXISTS", "message": message},
    }


async def refuse(world: World, replay: Replay, child: ChildRecord) -> bool:
    """After the creation of ``child``'s run conflicted: True when the run is not this
    parent's child (a start under the same business id won the generation), and the parent's
    wait on it was failed with ``RUN_ALREADY_EXISTS`` (recorded in the parent's log, which is
    woken); False when it is this parent's own child (a previous delivery created it)."""
    assert child.run_id is not None
    if child.business_id is None:
        return False
    info = await world.get_run(child.run_id)
    parent = info.attributes.get("parent") if info is not None else None
    if isinstance(parent, dict) and (parent.get("runId"), parent.get("cid")) == (
        replay.run_id,
        child.cid,
    ):
        return False
    error = _already_exists(child.business_id, child.run_id)
    appended = True
    try:
        await world.append(replay.run_id, [NewEvent(EventType.CHILD_COMPLETED, child.cid, error)])
    except EntityConflictError:
        appended = False  # refused already: wake the parent again all the same
    except RunTerminalError:
        return True
    wake = flow_message(world, replay.run_id, WakeReason.CHILD, after_own_append=appended)
    await send(world, FLOW_TOPIC, wake, idempotency_key=f"{replay.run_id}:{child.cid}:refused")
    return True
