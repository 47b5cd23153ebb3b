"""Admission under a workflow's concurrency limit (see ``wayline.Limit``): before a run's
first ``run_started`` it takes a slot of its key in the world, or waits for one, visibly.

A holder whose log cannot be read (``CORRUPT_LOG``) keeps its slot until it is repaired and
ends, as a fenced run keeps its hook tokens: the world cannot tell that it ended. Its damage is
its own, so the waiting run names it (``unreadable`` in its block) and waits on."""

from __future__ import annotations

import logging
from typing import Any

from .._core.concurrency import Limit
from .._core.definitions import WorkflowDefinition
from .._core.events import EventType, NewEvent, RunStatus
from .._core.messages import ConcurrencyRetry
from .._core.rate_limits import RateLimit
from .._core.replay import Replay
from .._core.serde import error_message
from ..errors import CorruptLogError, EntityConflictError, RunTerminalError
from ..world import FLOW_TOPIC, Delivery, RunInfo, World
from ..world.ports import EventLog
from ..world.sending import send
from .ending import fail_run

log = logging.getLogger("wayline.runtime")

CODE = "CONCURRENCY_LIMIT"
_LONGEST_PAUSE = 5.0


async def admit(
    world: World,
    info: RunInfo,
    workflow: WorkflowDefinition[..., Any],
    replay: Replay,
    delivery: Delivery,
) -> bool:
    """True when the run may start now. False: it waits (blocked, ``waitingFor:
    concurrency``) and a later message tries again; the caller acks this one."""
    limit = workflow.concurrency
    if limit is None or replay.ending.cancel_requested:
        return True  # a run cancelled while waiting ends without taking a slot's turn
    run_id = replay.run_id
    key = await run_key(world, workflow, replay, limit, "concurrency")
    if key is None:
        return False
    won, holders = await world.acquire_slot(key, run_id, limit.max)
    if won:
        return True
    message = (
        f"waiting for a concurrency slot of {key!r}: {len(holders)} of {limit.max} held by "
        f"{', '.join(holders)}"
    )
    fenced = await _unreadable(world, holders)
    for holder, bad in fenced.items():
        message += f"; {holder} keeps its slot until it is repaired and ends: {bad}"
    shown = info.error or {}
    if (
        info.status is not RunStatus.BLOCKED
        or shown.get("code") != CODE
        or shown.get("unreadable", []) != list(fenced)
    ):
        log.info("run %s %s", run_id, message)
        data: dict[str, Any] = {
            "code": CODE,
            "message": message,
            "waitingFor": "concurrency",
            "limit": key,
        }
        if fenced:
            data["unreadable"] = list(fenced)
        try:
            await world.append(run_id, [NewEvent(EventType.RUN_BLOCKED, data=data)])
        except (RunTerminalError, EntityConflictError):
            return False
    payload = delivery.payload if isinstance(delivery.payload, dict) else {}
    tries = int(payload.get("tries") or 0) + 1
    await send(
        world,
        FLOW_TOPIC,
        ConcurrencyRetry(run_id, tries).to_wire(),
        # a successor key: this delivery's own key is still held while it is in flight
        idempotency_key=f"{run_id}:concurrency:after:{delivery.message_id}",
        delay_seconds=min(_LONGEST_PAUSE, 0.05 * 2 ** min(tries, 7)),
    )
    return False


async def run_key(
    world: World,
    workflow: WorkflowDefinition[..., Any],
    replay: Replay,
    limit: Limit | RateLimit,
    kind: str,
) -> str | None:
    """The key of this run under ``limit``, or None when decoding its input or the key
    function raised: the run cannot be placed, so it fails (``<KIND>_KEY``)."""
    try:
        args, kwargs = workflow.signature.decode_args(replay.input, what="input")
        return limit.key_for(workflow.name, args, kwargs)
    except Exception as err:
        why = f"{type(err).__name__}: {error_message(err)}"
        message = f"the {kind.replace('_', ' ')} key of {workflow.name!r} raised {why}"
        await fail_run(world, replay.run_id, f"{kind.upper()}_KEY", message)
        return None


async def _unreadable(world: EventLog, holders: list[str]) -> dict[str, CorruptLogError]:
    """The holders whose logs cannot be read, with the error each read meets. Only a run that
    has to wait asks: a person reading its block learns which repair would let it start."""
    fenced: dict[str, CorruptLogError] = {}
    for holder in holders:
        try:
            await world.get_run(holder)
        except CorruptLogError as err:
            fenced[holder] = err
    return fenced
