"""Re-arming starts that were lost between their two writes.

A start writes the run's ``run_created`` to the log, then its start message to the queue
(``Client.start``, and a parent's ``start_child``): two writes, in two transactions on either
world. A process that dies between them leaves the run ``pending`` with no message to move
it, and a worker already running never hears of it (its startup recovery came before). So a
running worker looks now and then (``Settings.start_rearm_seconds``) for the runs of its
workflows that are pending with no stored message naming them, and sends the start again.

Only a run found so on two passes in a row, a whole period apart, is re-armed: a start under
way writes its message well within that (no clock is compared, so a skew between the worker
and the server that stamped ``created_at`` does not matter). The message is the start's own
(``{run}:start`` key, as the client's): while one is stored, a second publish of it, by
another worker's pass or by a client whose start was only slow, is deduplicated to it. One
that comes after the first was taken and acked is one more wake of the run, which replays
it: a step recorded once never runs again, so each body still runs once.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping

from .._core.events import RunStatus
from .._core.messages import Wake, WakeReason
from ..world import FLOW_TOPIC, World
from ..world.sending import send

log = logging.getLogger("wayline.worker")

_SCAN_LIMIT = 100_000
"""Pending runs read per pass (as ``Worker.recover_runs`` reads live runs)."""


def due(
    suspects: Mapping[str, float], stranded: Mapping[str, float]
) -> tuple[list[str], dict[str, float]]:
    """The runs to re-arm now, and the suspects for the next pass. ``stranded``: the runs
    pending with no message on this pass (run id to ``created_at``, which tells a run from
    another under the same id after a cleanup); ``suspects``: the previous pass's."""
    now = sorted(r for r, created in stranded.items() if suspects.get(r) == created)
    later = {r: created for r, created in stranded.items() if suspects.get(r) != created}
    return now, later


class LostStarts:
    """One worker's passes (``sweep``), remembering what the previous one found."""

    def __init__(self, world: World, workflows: Collection[str]) -> None:
        self.world = world
        self.workflows = workflows
        self._suspects: dict[str, float] = {}
        self._mark: int | None = None

    async def sweep(self) -> list[str]:
        """One pass: re-arm the runs found stranded on the previous pass too; return them.

        A pass is skipped when no run was created or changed status since the previous one
        (``World.runs_mark``) and that one found no suspect: a stranded start is a run created
        since, or a suspect already. On NATS listing the pending runs reads the last entry of
        every run, so without the skip a worker beside a million sleeping runs read a million
        entries a minute while idle."""
        mark = await self.world.runs_mark()
        if mark is not None and mark == self._mark and not self._suspects:
            return []
        self._mark = mark
        pending = {
            info.run_id: info.created_at
            for info in await self.world.list_runs(status=RunStatus.PENDING, limit=_SCAN_LIMIT)
            if info.workflow in self.workflows
        }
        woken = await self.world.runs_with_messages() if pending else set()
        # ``None``: the world cannot tell; the keyed publish then dedupes to a stored start
        stranded = {r: c for r, c in pending.items() if woken is None or r not in woken}
        rearm, self._suspects = due(self._suspects, stranded)
        for run_id in rearm:
            log.warning(
                "run %s is pending with no start message (its starter died between its two "
                "writes?): sending its start again",
                run_id,
                extra={"run_id": run_id},
            )
            await send(
                self.world,
                FLOW_TOPIC,
                Wake(run_id, WakeReason.REARM).to_wire(),
                idempotency_key=f"{run_id}:start",
                recoverable=True,
            )
        return rearm
