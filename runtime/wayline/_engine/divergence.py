"""A replay divergence never fails a run (Temporal fails only the workflow task).

When the code a worker has disagrees with a run's log (a step added before a hook, a call
reordered), the run is left live and untouched: nothing of the divergent replay is written,
the run shows ``blocked`` with where the log and the code part, and the delivery is set aside
(acked: the blocked status is the record, and a worker with the right definition re-arms the
run when it starts, as for a definition mismatch). A person then rolls the workers back, or
ends the run explicitly (``wayline runs fail RUN_ID``, ``Client.fail``). A worker that later
replays the run without diverging lifts the block.
"""

from __future__ import annotations

import logging

from .._core.events import EventType, NewEvent, RunStatus
from ..errors import EntityConflictError, ReplayDivergenceError, RunTerminalError
from ..world import RunInfo, World, fold_run
from .messages import ACK, Verdict

log = logging.getLogger("wayline.runtime")

CODE = ReplayDivergenceError.code


def held(info: RunInfo) -> bool:
    """The run is blocked by a divergence: it is unblocked only by a replay that gets past
    it, never merely by being received (a divergent worker would block it again at once)."""
    return info.status is RunStatus.BLOCKED and (info.error or {}).get("code") == CODE


async def set_aside(world: World, info: RunInfo, err: ReplayDivergenceError) -> Verdict:
    message = err.message
    log.error(
        "run %s blocked, not failed: %s (%s); roll back to a worker with the run's "
        "definition, or end it with `wayline runs fail %s`",
        info.run_id,
        message,
        err.details.get("hint", ""),
        info.run_id,
    )
    if held(info) and (info.error or {}).get("message") == message:
        return ACK  # already shown; write nothing
    data = {
        "code": CODE,
        "message": message,
        "seq": err.details.get("seq"),
        "expected": err.details.get("expected"),
        "got": err.details.get("got"),
        "required": info.attributes.get("definition"),
    }
    try:
        await world.append(info.run_id, [NewEvent(EventType.RUN_BLOCKED, data=data)])
    except (RunTerminalError, EntityConflictError):
        pass
    return ACK


async def lift(world: World, info: RunInfo) -> RunInfo:
    """The replay got past the divergence (a rolled-back worker): the run goes on with the
    status the block was put over (running, or unwinding)."""
    if not held(info):
        return info
    try:
        lifted = await world.append(info.run_id, [NewEvent(EventType.RUN_UNBLOCKED)])
    except (EntityConflictError, RunTerminalError):  # lifted or ended meanwhile
        return await world.get_run(info.run_id) or info
    return fold_run(info, lifted[-1])
