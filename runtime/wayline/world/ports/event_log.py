"""The event-log port: append a run's events with validation and optimistic concurrency,
read them back, list runs and find hooks by token."""

from __future__ import annotations

import abc
from collections.abc import Sequence
from dataclasses import dataclass

from ..._core.events import Event, NewEvent, RunStatus
from ..._core.projections import RunInfo
from ..._core.search_attributes import Where


@dataclass(frozen=True, slots=True)
class HookInfo:
    token: str
    run_id: str
    correlation_id: str
    active: bool


ALL = 2**62
"""A ``limit`` that no world reaches: the whole list."""


def past(after: tuple[float, str], run: RunInfo) -> bool:
    """Whether ``run`` comes after the run at ``after`` in the runs' order (newest first,
    then by run id)."""
    return (-run.created_at, run.run_id) > (-after[0], after[1])


class EventLog(abc.ABC):
    """Every run's log of events, and the views folded from it (``_core.projections``)."""

    get_run_reads_log: bool = False
    """True when :meth:`get_run` folds the run's whole log, so an entry that does not read
    anywhere in it raises ``CorruptLogError``. Where it reads a summary row instead (SQLite),
    ``Client.get_run`` reads the log as well, as docs/hostile-input.md promises."""

    @abc.abstractmethod
    async def append(
        self, run_id: str, events: Sequence[NewEvent], *, expected_seq: int | None = None
    ) -> list[Event]:
        """Append ``events`` atomically, in order, validated by ``events.apply_transition``.

        With ``expected_seq`` the batch is appended only if the run's last sequence is exactly
        that number (0 for a new run), else :class:`SequenceConflictError`. A terminal run
        event also disposes the run's active hooks (their tokens become free).
        """

    @abc.abstractmethod
    async def list_events(self, run_id: str, after_seq: int = 0) -> list[Event]:
        """Events with ``seq > after_seq``, in order."""

    async def events_page(self, run_id: str, after_seq: int, limit: int) -> list[Event]:
        """At most ``limit`` events with ``seq > after_seq``, in order: a page of a run's log
        (the console's ``/events``), read without the rest of the log where the world can.
        Payloads as :meth:`list_events` gives them. This default reads the events after
        ``after_seq`` and keeps the first ``limit`` (the in-memory world)."""
        return (await self.list_events(run_id, after_seq=after_seq))[: max(0, limit)]

    @abc.abstractmethod
    async def get_run(self, run_id: str) -> RunInfo | None: ...

    async def known_end(self, run_id: str) -> RunInfo | None:
        """The run's final view when this world instance already holds it (it appended or
        read the run's end), without a read; None otherwise. An ended run never changes, so
        what was seen ending is its view for good. The default knows none."""
        return None

    def log_mark(self, run_id: str) -> str | None:
        """An opaque mark of where this world instance's own view of the run's log ends, when
        it holds one (None otherwise; the default holds none). A message sent right after the
        caller's own append to the run may carry it (``logMark``): :meth:`read_run_at` given
        that mark in a process whose view still ends there, and is current, answers from that
        view without a read. Safe because every write is fenced against the log's end: a view
        that missed a later entry has its next append refused and read again, and the
        message's own cause (the append before it) is in the view (docs/nats.md)."""
        return None

    async def read_run_at(self, run_id: str, mark: str) -> tuple[RunInfo | None, list[Event]]:
        """:meth:`read_run`, answered from this instance's view of the run when it still ends
        at ``mark`` (a delivery's ``logMark``, see :meth:`log_mark`). The default reads."""
        return await self.read_run(run_id)

    async def read_run(self, run_id: str) -> tuple[RunInfo | None, list[Event]]:
        """The run and its whole log from one read where the world can (what a delivery drives
        from); ``(None, [])`` for an unknown run, no events for an ended one (a late message
        needs only its status). The default reads the two in turn."""
        info = await self.get_run(run_id)
        if info is None or info.status.terminal:
            return info, []
        return info, await self.list_events(run_id)

    async def read_run_after(
        self, run_id: str, after_seq: int
    ) -> tuple[RunInfo | None, list[Event]]:
        """:meth:`read_run` with only the events after ``after_seq``: what a wake that goes on
        from a live replay reads (``_engine.live_replays``), so that it does not grow with the
        run's log. The default reads the run, then the events after ``after_seq``."""
        info = await self.get_run(run_id)
        if info is None or info.status.terminal:
            return info, []
        return info, await self.list_events(run_id, after_seq=after_seq)

    @abc.abstractmethod
    async def list_runs(
        self,
        *,
        status: RunStatus | None = None,
        workflow: str | None = None,
        limit: int = 100,
        where: Sequence[Where] = (),
        since: float | None = None,
    ) -> list[RunInfo]:
        """Newest first. ``where``: search attribute expressions that all hold, answered from
        the world's attribute index (``search_attributes.matches`` is the rule); ``since``:
        created at or after this time (epoch seconds)."""

    async def runs_page(
        self,
        *,
        after: tuple[float, str] | None,
        limit: int,
        status: RunStatus | None = None,
        workflow: str | None = None,
        where: Sequence[Where] = (),
    ) -> list[RunInfo]:
        """:meth:`list_runs`' order (newest first, then by run id) from just past ``after``
        (the ``(created_at, run_id)`` of the last run a page showed): a cursor whose page
        stays as fast deep in the list as at its head where the world has an index. This
        default reads the whole filtered list and slices it (the in-memory world's few runs)."""
        every = await self.list_runs(status=status, workflow=workflow, where=where, limit=ALL)
        return [r for r in every if after is None or past(after, r)][:limit]

    async def runs_mark(self) -> int | None:
        """A number that rises whenever a run is created or changes status (it may rise more
        often), read in one cheap call whatever the number of runs; None where the world has
        no such number. A caller that looks at the runs now and then (``_engine.lost_starts``)
        can skip a look when the mark has not moved."""
        return None

    async def count_runs(
        self, *, workflow: str | None = None, where: Sequence[Where] = ()
    ) -> dict[RunStatus, int]:
        """How many runs have each status (a status none has is left out), over every run,
        not a page. This default counts the whole list; a world with an index counts there."""
        counts: dict[RunStatus, int] = {}
        for run in await self.list_runs(workflow=workflow, where=where, limit=ALL):
            counts[run.status] = counts.get(run.status, 0) + 1
        return counts

    async def follow_runs(self) -> None:
        """This process will read the runs page often (a console): a world whose page reads
        every run's name at each call (NATS) starts keeping the runs index in memory, so later
        pages, filters, cursors and counts are answered from it; the answers are the same,
        sooner. Returns at once: a page read before the index is in memory is read from the
        index's newest entries (the whole index's names when it lies deeper), and the counts
        read then are counted by the server from the index (partial, ``runs_loading``, only
        when that count fails). This default keeps nothing: the other worlds' pages read an
        index already."""
        return None

    def runs_loading(self) -> bool:
        """Whether the counts by status (``count_runs``) may still be partial: a world that
        follows its runs (``follow_runs``), is still loading them (NATS) and could not have
        its index counted by the server during this load counts only the runs it has read
        so far. False once loaded, and for a world that follows nothing; this default:
        always False."""
        return False

    @abc.abstractmethod
    async def get_hook(self, token: str) -> HookInfo | None:
        """The active hook holding ``token``, or the most recent disposed one."""

    async def repair_run(self, run_id: str, drop_seq: int | None = None) -> list[str]:
        """Remove the entry ``drop_seq`` of a run's log if it is one that does not read (does
        not decode, or does not follow from the entries before it; :class:`CorruptLogError`
        names it), then check the whole log reads again. Returns what was done; refuses
        (changing nothing) to remove an entry that reads."""
        raise NotImplementedError(f"{type(self).__name__} does not implement repair")
