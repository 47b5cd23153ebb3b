"""Hand-off at a step boundary (the reference runtime's ``reinvoke()``).

One delivery would otherwise drive a whole sequential run, however long, and trip the
invocation bound (see ``fencing``). At a step boundary past ``handoff_seconds`` (or once its
fence tripped), the handler stops driving, and the run continues under a *new* flow message;
the old delivery is then acked. The boundary is the top of the drive loop: every inline body
it started has settled and been recorded, so no owned step is non-terminal when the owning
message is acked (seed 000, first invariant); a deferred completion is flushed first.
"""

from __future__ import annotations

import logging

from .._core.messages import Wake, WakeReason
from ..world import FLOW_TOPIC, Delivery, World
from ..world.sending import send
from . import fencing
from .messages import ACK, Verdict

log = logging.getLogger("wayline.runtime")


def stop_here(closing: bool) -> bool:
    """Stop driving at this step boundary: the worker is closing, or the run is handed off."""
    return closing or fencing.due()


async def leave(world: World, closing: bool, run_id: str, delivery: Delivery) -> Verdict:
    """What becomes of a delivery whose drive stopped before the run suspended."""
    fence = fencing.current()
    if closing or fence is None:
        return Verdict("retry", delay=0.0)  # closing: hand the run back
    log.debug(
        "run %s handed off after %.1fs under %s%s",
        run_id,
        fence.elapsed(),
        delivery.message_id,
        f" (fenced: {fence.tripped})" if fence.tripped else "",
    )
    await send(
        world,
        FLOW_TOPIC,
        Wake(run_id, WakeReason.HANDOFF).to_wire(),
        idempotency_key=f"{run_id}:handoff:{delivery.message_id}",
    )
    return ACK
