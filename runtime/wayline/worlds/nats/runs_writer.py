"""The runs index's writer: one background task per world that writes the entries of the runs
whose status this process moved, so that an append never waits for the index (docs/nats.md,
"The runs index").

An append used to publish the run's new entry and wait for its acknowledgement before it
returned, which added a round trip and a few loop turns to every status change on a step's
path. The append now only notes the change here and returns. The writer waits
:data:`WINDOW`, takes what was noted meanwhile as one batch, keeps the newest status of each
run (a run's older entries are purged by the write of its newest one), writes the batch's runs
concurrently and the next batch only after this one, so a run's entries are written in the
order of its statuses. A write that fails is tried again a few times; one that still fails is
logged and left to the index's reconciliation with the log, as is what a process that dies
leaves unwritten.

How long a listing in another process may lag behind an append: while the server answers,
:data:`WINDOW` and one batch's write (one publish round trip, as many batches as are waiting
behind it); past that, a status write that is lost is repaired by the first page that shows
the run (it reads the run's log), and the counts and filtered pages within
``RECONCILE_ANYWAY`` (60 s) by the reconciliation.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field

from ...errors import WaylineError
from ...waits import wait_set
from ...world import RunInfo
from .runs_index import RunsIndex

log = logging.getLogger(__name__)

RETRY_DELAYS = (0.05, 0.25, 1.0)
"""Seconds before each new try of a batch whose write failed: a server that refused for a
moment (a leader election takes about a second) is waited out; past that the reconciliation
is the repair, and a writer that kept trying would hold back every run's newer entries."""

WINDOW = 0.1
"""Seconds the writer waits after a note before it writes, so that the statuses a short run
goes through together (pending, running, completed in a few milliseconds) are written as one
entry: one publish instead of three publishes and two purges. It is part of how long another
process's listing may lag; a read in this process does not wait for it (``flush``)."""

BATCH = 500
"""Runs one batch writes at most: their publishes are in flight together, which a burst of
thousands of starts would otherwise put on the connection at once."""


@dataclass(slots=True)
class _Pending:
    """What a batch writes for one run: its newest status, and the subjects of the statuses
    it had before, whose entries the write purges."""

    info: RunInfo
    new: bool
    known: bool
    """Whether every old status is known; a run this process held no view of has an old
    entry it cannot name, and is written with ``RunsIndex.put``, which looks it up."""
    old: list[str] = field(default_factory=list)


class RunsWriter:
    def __init__(self, index: RunsIndex) -> None:
        self._index = index
        self._pending: dict[str, _Pending] = {}
        self._wake = asyncio.Event()
        self._idle = asyncio.Event()
        self._idle.set()
        self._hurry = asyncio.Event()
        """Set by a reader that waits for the notes (``flush``): no window then."""
        self._task: asyncio.Task[None] | None = None

    def note(self, info: RunInfo, before: RunInfo | None, *, new: bool) -> None:
        """The run's status moved from ``before`` (None: unknown to this process, or a new
        run when ``new``) to ``info``'s; written by the writer, soon and in order."""
        held = self._pending.get(info.run_id)
        if held is None:
            old = [] if new or before is None else [self._index.subject(before)]
            self._pending[info.run_id] = _Pending(info, new, new or before is not None, old)
        else:  # the entry not written yet is replaced; what it would have purged still is
            held.info = info
        self._idle.clear()
        self._wake.set()
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(
                self._write_forever(), name="wayline-runs-index-writer"
            )
            self._task.add_done_callback(_exited)

    async def flush(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for every entry noted so far to be written (or
        given up); False when some are still waiting."""
        self._hurry.set()
        return await wait_set(self._idle, timeout)

    async def close(self, grace: float) -> None:
        """Write what is noted, for up to ``grace`` seconds, then stop; what is left unwritten
        is repaired from the log by the index's readers."""
        try:
            if not await self.flush(grace):
                left = len(self._pending)
                log.warning("runs index: %d entries left to the reconciliation", left)
        finally:  # a close that is itself cancelled still stops the writer
            task, self._task = self._task, None
            if task is not None:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)

    async def _write_forever(self) -> None:
        while True:
            await self._wake.wait()
            if not self._hurry.is_set():  # let the run's next status join this one
                await wait_set(self._hurry, WINDOW)
            self._wake.clear()
            runs = list(self._pending)[:BATCH]
            batch = [self._pending.pop(run_id) for run_id in runs]
            await self._write(batch)
            if self._pending:
                self._wake.set()
            else:
                self._hurry.clear()
                self._idle.set()

    async def _write(self, batch: list[_Pending]) -> None:
        for delay in (*RETRY_DELAYS, None):
            results = await asyncio.gather(
                *(self._write_one(p) for p in batch), return_exceptions=True
            )
            failed = [p for p, r in zip(batch, results, strict=True) if r is not None]
            errors = [r for r in results if isinstance(r, BaseException)]
            for err in errors:
                if not isinstance(err, WaylineError):
                    raise err
            if not failed:
                return
            if delay is None:
                log.warning(
                    "runs index: %d entries not written, left to the reconciliation: %s",
                    len(failed),
                    errors[0],
                )
                return
            await asyncio.sleep(delay)
            batch = failed

    async def _write_one(self, pending: _Pending) -> None:
        if pending.known:
            await self._index.moved(pending.info, pending.old)
        else:
            await self._index.put(pending.info)


def _exited(task: asyncio.Task[None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("the runs index's writer exited: %r", task.exception())
