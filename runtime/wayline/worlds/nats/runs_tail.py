"""The newest entries of the runs index's stream, read backward from its last sequence, so that
a console's first runs pages come back at once while its runs model (``runs_model``) loads
(docs/nats.md, "The runs index's read model"): listing the index's 100,000 names takes about as
long as the model's load.

Which entries a page needs is known from the entries' server timestamps. A run's entry is
written after the run was created, so every entry the tail has not read (one below the lowest
sequence it read) belongs to a run created before that lowest entry was stored, give or take
the clocks' skew (:data:`SKEW`): a run created later than that bound has an entry the tail
read, and is held with its newest entry. A page whose last run was created past the bound is
therefore the page the whole index gives; one that is not reads more of the stream backward,
up to :data:`MOST` entries, past which the caller reads the index's names as before
(``None``). The whole stream read (a small index) answers every page.

How far back to read is asked of the server once the tail holds enough runs for the page: a
page whose last run so far was created at ``c`` is complete once the lowest entry read was
stored before ``c - SKEW``, so the first entry stored at or after that time (one direct get by
``start_time``) gives the sequence to read down to (and a window below it, the entry just
below being purged when a status change purged it), and the windows down to it are asked for
:data:`WINDOWS_AT_ONCE` at a time rather than one round trip after another
(:meth:`RunsTail._back`). The runs read there can only make the page's last run newer, so that
read completes the page but when the
server's timestamps go backward; the page is still picked only once :meth:`RunsTail._known`
proves it, and a page that is not reads on, so the estimate decides how many windows are read
at once, never the page.

A run held here may show an older status than its log has when a late repair of an older
status was written after the newer entry (``RunsIndex.put`` purges it soon after); as with the
model, the rows are read from the runs' logs and checked there, so the tail decides which runs
and in what order, never a row's status.
"""

from __future__ import annotations

import asyncio
import bisect
from collections.abc import Callable
from typing import Any

from ..._core.events import RunStatus
from .codec import parse_stamp, rfc3339
from .direct import StoredMsg, direct_batch
from .runs_index import Entry, RunsIndex, wildcard
from .runs_model import WINDOWS_AT_ONCE, Held, newer, read_window, unplace

WINDOW = 500
"""Sequence numbers one backward read covers (one batch direct get)."""

MOST = 20_000
"""Entries the tail reads backward at most before a page falls back on the index's names: a
page whose runs lie deeper is older than a console's first screens."""

SKEW = 5.0
"""Seconds a run's ``created_at`` (its creator's clock) may be later than the server's
timestamp of its first index entry (the server's clock), written after it: the bound a page
must pass is the lowest entry's timestamp plus this."""


def stamp_of(msg: StoredMsg) -> float | None:
    """When the server stored ``msg`` (its ``Nats-Time-Stamp``), as seconds since the epoch;
    None when the header is missing or unreadable."""
    try:
        return parse_stamp(msg.headers.get("Nats-Time-Stamp", ""))
    except ValueError:
        return None


class RunsTail:
    def __init__(self, nc: Any, index: RunsIndex, *, url: str, timeout: float) -> None:
        self._nc, self._index = nc, index
        self._url, self._timeout = url, timeout
        self.runs: dict[str, Held] = {}
        self.order: list[tuple[float, str]] = []
        """The held runs' keys, ``(-created_at, run_id)``, sorted."""
        self.floor = 0
        """The lowest sequence read (every sequence from it to :attr:`top` is read); 0 before
        the first read."""
        self.first = 0
        """The stream's first sequence when the tail started: below it nothing is stored."""
        self.top = 0
        """The highest sequence read."""
        self.bound: float | None = None
        """No run created past this time (server clock plus :data:`SKEW`) lies below
        :attr:`floor`; None once the whole stream is read (nothing lies below)."""
        self._made: object = None
        self._within = wildcard(index.names)[:-1]  # the index's subjects' prefix (``newer``)
        self._lock = asyncio.Lock()

    def _absorb(self, msg: StoredMsg) -> None:
        found = newer(self.runs, msg, self._within)
        if found is None:
            return
        run_id, new, held = found
        if held is not None:
            unplace(self.order, (-held.created_at, run_id))
        self.runs[run_id] = new
        bisect.insort(self.order, (-new.created_at, run_id))

    def drop(self, run_id: str) -> None:
        """Forget a run that is gone (a page found it gone, or this process deleted it)."""
        held = self.runs.pop(run_id, None)
        if held is not None:
            unplace(self.order, (-held.created_at, run_id))

    async def _read(self, start: int, batch: int) -> list[StoredMsg]:
        return await read_window(
            self._nc, self._index, start, batch, url=self._url, timeout=self._timeout
        )

    async def _start(self) -> None:
        """Read the stream's state at the first read; a stream made again since (deleted, then
        provisioned and reconciled from the log: its sequences start again from 1) is read
        again from its end."""
        info = await self._index.state()
        if self.floor and info.get("created") != self._made:
            self.runs, self.order, self.floor = {}, [], 0
        if not self.floor:
            self._made = info.get("created")
            self.first = max(1, int(info.get("first_seq") or 0))
            last = int(info.get("last_seq") or 0)
            self.top = last
            self.floor = last + 1  # nothing read yet: the first backward read ends at last
            # nothing known until a window is read; an empty stream holds every page (none)
            self.bound = None if last < self.first else float("inf")

    async def _forward(self) -> None:
        """Read what was written past :attr:`top` since (any writer's entries)."""
        while True:
            msgs = await self._read(self.top + 1, WINDOW)
            for msg in msgs:
                self.top = max(self.top, msg.seq)
                self._absorb(msg)
            if len(msgs) < WINDOW:
                return

    async def _below(self, before: float) -> int | None:
        """The sequence of the first entry the server stored at or after ``before`` (server
        clock, seconds since the epoch); None when every entry was stored before it."""
        # no subject filter, as for the windows (``read_window``)
        request = {"start_time": rfc3339(before), "batch": 1}
        msgs, _ = await direct_batch(
            self._nc, self._index.stream, request, timeout=self._timeout, url=self._url
        )
        return msgs[0].seq if msgs else None

    async def _back(self, reach: float | None = None) -> bool:
        """Read below :attr:`floor`: one window, or, given ``reach`` (the ``created_at`` of
        the page's last run as the tail holds it so far), every window down to the entry
        stored just before ``reach - SKEW``, asked for together; False when nothing is left
        to read or the tail read :data:`MOST` entries."""
        if self.bound is None or self.top - self.floor + 1 >= MOST:
            return False
        start = max(self.first, self.floor - WINDOW)
        if reach is not None and start > self.first:
            found = await self._below(reach - SKEW)
            # the entries below the first one stored at or after ``reach - SKEW`` were stored
            # before it, but the one just below may be purged (a status change purges a run's
            # older entry), and the lowest entry read would then be ``found`` itself, stored
            # after that time: the window below it is read too, in the same round, so that the
            # bound passes ``reach`` unless a whole window there is purged. No entry at or
            # after that time (a replica behind answered, or the entries read were purged
            # since) tells nothing of where to stop: one window is read, as without ``reach``
            if found is not None:
                start = max(self.first, self.top + 1 - MOST, min(start, found - WINDOW))
        spans = [(at, min(at + WINDOW, self.floor)) for at in range(start, self.floor, WINDOW)]
        read: list[list[StoredMsg]] = []
        # at most WINDOWS_AT_ONCE windows asked for together, as the model's load does: each
        # window's reply must land within the request timeout while the others' decode
        for group in range(0, len(spans), WINDOWS_AT_ONCE):
            asked = spans[group : group + WINDOWS_AT_ONCE]
            read += await asyncio.gather(*(self._read(at, end - at) for at, end in asked))
        msgs = [m for (_, end), got in zip(spans, read, strict=True) for m in got if m.seq < end]
        for msg in msgs:
            self._absorb(msg)
        if start <= self.first:
            self.bound = None
        else:
            # the lowest entry read gives the bound; windows with no entry of the index (all
            # purged) keep the bound it had, which is later than their entries'
            stamps = [s for s in map(stamp_of, msgs[:1]) if s is not None]
            if stamps:
                self.bound = stamps[0] + SKEW
        self.floor = start
        return True

    def _known(self, at: int) -> list[tuple[float, str]] | None:
        """The key at ``at`` in the tail's order as a list of one, or none past its end when
        the whole stream is read; None when a run the tail has not read may come first."""
        keys = self.order[at : at + 1]
        if self.bound is None or (keys and -keys[0][0] > self.bound):
            return keys
        return None

    async def entries(
        self,
        after: tuple[float, str] | None,
        limit: int,
        status: RunStatus | None,
        workflow: str | None,
    ) -> list[Entry] | None:
        """The first ``limit`` runs past ``after`` in the runs' order with that status and
        workflow, as the index's whole stream names them, read from its newest entries; None
        when that needs more than :data:`MOST` of them."""

        def kept(held: Held) -> bool:
            return (status is None or held.status is status) and (
                workflow is None or held.workflow == workflow
            )

        async with self._lock:
            await self._start()
            await self._forward()
            while (found := self._pick(after, limit, kept)) is None:
                if not await self._back(self._reach(after, limit, kept)):
                    return None
            return found

    def _reach(
        self, after: tuple[float, str] | None, limit: int, kept: Callable[[Held], bool]
    ) -> float | None:
        """The ``created_at`` of the page's last run among the runs the tail holds, known or
        not to come first; None when it holds fewer than ``limit`` of them past ``after``."""
        at = 0 if after is None else bisect.bisect_right(self.order, (-after[0], after[1]))
        count = 0
        for neg, run_id in self.order[at:]:
            if kept(self.runs[run_id]):
                count += 1
                if count == limit:
                    return -neg
        return None

    def _pick(
        self, after: tuple[float, str] | None, limit: int, kept: Callable[[Held], bool]
    ) -> list[Entry] | None:
        """The page, when every run up to its last one (or the end) is known to the tail."""
        at = 0 if after is None else bisect.bisect_right(self.order, (-after[0], after[1]))
        out: list[Entry] = []
        while len(out) < limit:
            keys = self._known(at)
            if keys is None:
                return None  # the next run in the order may lie below the floor
            if not keys:
                return out  # the whole stream is read: no more runs
            at += 1
            run_id = keys[0][1]
            held = self.runs[run_id]
            if kept(held):
                subject = self._index.subject_of(
                    held.status, held.workflow, held.created_at, run_id
                )
                out.append(Entry(run_id, held.status, held.workflow, held.created_at, subject))
        return out
