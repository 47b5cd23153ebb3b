"""The reader of every partition's event log, for what spans runs: listing, the runs index's
reconciliation, cleanup's live runs (docs/nats.md, "Partitions").

A world of N > 1 partitions keeps one ``EventLog`` a partition (each reads and appends to its
own events stream); everything about one run goes to the log of its partition
(``names.partition_of``). What asks about many runs asks each partition's log and merges the
answers, in the order a single log gives them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sequence
from typing import Any

from ..._core.events import RunStatus
from ...world import RunInfo
from .eventlog import EventLog
from .names import partition_of


class AllPartitions:
    """The logs of every partition, read as one (the methods of ``EventLog`` that span runs,
    and ``partitions``, which ``runs_pages.reconcile`` reads)."""

    def __init__(self, logs: Sequence[EventLog]) -> None:
        self.logs = list(logs)
        self.partitions = len(self.logs)

    def of(self, run_id: str) -> EventLog:
        return self.logs[partition_of(run_id, self.partitions)]

    async def list_runs(
        self,
        status: RunStatus | None,
        workflow: str | None,
        limit: int,
        *,
        run_ids: Iterable[str] | None = None,
        tokens: Iterable[str] = (),
        **options: Any,
    ) -> list[RunInfo]:
        """``EventLog.list_runs`` over every partition (``options``: its ``since``, ``where``,
        ``checked`` and ``after``, given to each log as they are)."""
        wanted: list[list[str]] | None = None
        if run_ids is not None:
            wanted = [[] for _ in self.logs]
            for run_id in run_ids:
                wanted[partition_of(run_id, self.partitions)].append(run_id)
        # a token does not always give its run id back (a hashed one): each log is asked
        # for every token, and only the one that holds the run answers for it
        asked = list(tokens)
        found = await asyncio.gather(
            *(
                log.list_runs(
                    status,
                    workflow,
                    limit,
                    run_ids=None if wanted is None else wanted[part],
                    tokens=asked,
                    **options,
                )
                for part, log in enumerate(self.logs)
            )
        )
        rows = [info for infos in found for info in infos]
        # newest first as one log lists them; a corrupt run (fenced, with no summary to order
        # it by) after the readable ones, as a log puts it
        rows.sort(key=lambda i: (i.status is RunStatus.CORRUPT, -i.created_at, i.run_id))
        return rows[: max(0, limit)]

    async def run_tokens(self) -> set[str]:
        out: set[str] = set()
        for tokens in await asyncio.gather(*(log.run_tokens() for log in self.logs)):
            out |= tokens
        return out

    async def last_appended(self) -> int:
        """The sum of every events stream's last sequence: it rises with every append to any
        of them (``runs_mark``), as one stream's does."""
        return sum(await asyncio.gather(*(log.last_appended() for log in self.logs)))
