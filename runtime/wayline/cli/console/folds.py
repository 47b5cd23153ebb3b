"""The console's folds of runs, kept between requests: a run's steps are read a page at a time
(``/api/runs/{id}/steps``), and folding the whole log for every page made opening a run of
thousands of steps fold its log once per page (docs/console.md, "Long runs"). Each fold is kept
with the position in the log it reached (the last event's ``seq``). The next request compares
it with the run's summary (``RunInfo.last_seq``): a run that did not move is not read at all,
and one that did has only the events after that position read and applied to the same fold,
which :meth:`RunView.apply` allows as the fold takes one event at a time. The folds kept are
bounded: the runs read least recently are dropped first.

A fold is of the log as stored (``Blobs.stored_events``): a value kept in a blob is still its
reference, so folding a run reads none of its large payloads; the console reads one when it is
asked for (a step's result link) or small enough to show."""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..._core.events import Event
from ..._core.projections import RunView
from ...client import Client
from ...world import RunInfo

KEPT_RUNS = 32
"""How many runs' folds a console keeps. A fold of a 5,000-step run is a few megabytes; a few
dozen runs cover everyone who has a run page open on a console, and a run read again after
it was dropped is folded once more, nothing worse."""


@dataclass
class _Kept:
    view: RunView
    seq: int = 0
    created_at: float = 0.0
    """When the run was created: a run made again under the same id was created later."""
    steps: list[dict[str, Any]] | None = None
    """The steps as JSON at ``seq``, made once for every page read at that position."""
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)


@dataclass
class Folded:
    """A run's fold as of ``seq``, and its steps as the API sends them."""

    view: RunView
    seq: int
    steps: list[dict[str, Any]]


class RunFolds:
    """Folds of the runs read lately, each brought up to date with the events after it.
    ``kept=0`` keeps none: every call folds the whole log, as before the cache."""

    def __init__(self, client: Client, kept: int = KEPT_RUNS) -> None:
        self._client = client
        self._kept = kept
        self._runs: OrderedDict[str, _Kept] = OrderedDict()
        self.folds = 0
        """Whole logs folded from their start (what the cache saves)."""
        self.catch_ups = 0
        """Folds brought forward by the events after their position alone."""

    async def read(
        self, run_id: str, info: RunInfo, events: Sequence[Event] | None = None
    ) -> Folded:
        """The run's fold as of the log's end, which ``info`` (the run's summary, read just
        before) names: a fold already there reads nothing more. ``events``: the whole log,
        when the caller read it already (the run's own page does), so nothing is read again."""
        kept = self._runs.get(run_id)
        if kept is None:
            kept = _Kept(RunView(run_id))
            if self._kept > 0:
                self._runs[run_id] = kept
                while len(self._runs) > self._kept:
                    self._runs.popitem(last=False)
        else:
            self._runs.move_to_end(run_id)
        async with kept.lock:
            # two pages of one run asked at once: the second waits and finds the fold current
            if kept.seq and info.created_at != kept.created_at:
                # the run was deleted and a new one made under its id: its log began again
                kept.view, kept.seq, kept.steps = RunView(run_id), 0, None
            kept.created_at = info.created_at
            if events is not None:
                fresh = [e for e in events if e.seq > kept.seq]
            elif kept.seq and kept.seq == info.last_seq:
                fresh = []  # the run did not move since: its log is not read at all
            else:
                fresh = await self._client.world.stored_events(run_id, after_seq=kept.seq)
            if fresh:
                if kept.seq == 0:
                    self.folds += 1
                else:
                    self.catch_ups += 1
                for event in fresh:
                    kept.view.apply(event)
                kept.seq, kept.steps = fresh[-1].seq, None
            if kept.steps is None:
                kept.steps = [s.to_json() for s in kept.view.steps.values()]
            return Folded(kept.view, kept.seq, kept.steps)
