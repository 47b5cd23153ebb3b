"""The quiet period of a debounced run (``wayline.Debounce``): its start message is handed back
until the period has passed since the last start that collapsed into it.

A start that collapses into the run appends ``run_debounced`` and writes no message; so the
run's own start message, due one period after the run was created, finds the period running
again and comes back when it ends. The time is the world's, from the events' stamps."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from .._core.events import Event
from .._core.projections import debounced_until
from .._core.replay import Replay
from ..world import FLOW_TOPIC, Delivery, RunInfo, World
from ..world.sending import send

log = logging.getLogger("wayline.runtime")

_LATE = 0.005
"""Seconds the message comes back after the period ends, so that it finds it ended."""


async def waited(
    world: World, info: RunInfo, events: Sequence[Event], replay: Replay, delivery: Delivery
) -> bool:
    """True when the run waits out its quiet period (its start comes back later; the caller
    acks this message). A run cancelled meanwhile goes on to end at once."""
    due = debounced_until(info, events)
    if due is None or replay.ending.cancel_requested:
        return False
    left = due - world.now()
    if left <= 0:
        return False
    await send(
        world,
        FLOW_TOPIC,
        {"runId": info.run_id, "reason": "debounce"},
        # a successor key: this delivery's own key is still held while it is in flight
        idempotency_key=f"{info.run_id}:debounce:after:{delivery.message_id}",
        delay_seconds=left + _LATE,
    )
    log.info("run %s is debounced: it begins in %.3fs unless started again", info.run_id, left)
    return True
