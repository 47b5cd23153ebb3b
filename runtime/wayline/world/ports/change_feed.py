"""The change-feed port: hear soon that some writer appended to a run's log."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection
from typing import Protocol


class RunWatch:
    """A subscription to a world's change feed (:meth:`World.watch_runs`); ``close()`` ends
    it."""

    def __init__(self, close: Callable[[], Awaitable[None]]) -> None:
        self._close = close

    async def close(self) -> None:
        await self._close()


class EndListener(Protocol):
    """Who a world tells of the runs' ends it hears (:meth:`ChangeFeed.on_ended`): the
    terminal hints of its clients (``world.terminal_hints``)."""

    def ended(self, run_id: str) -> None:
        """A terminal append to the run was heard (a hint: the listener reads the run)."""

    def may_be_lost(self) -> None:
        """An end may have gone unheard (a lost connection, a slow subscriber)."""

    def waited(self) -> Collection[str]:
        """The runs the listener waits for now (a world that follows ends only while someone
        waits looks for these)."""


class ChangeFeed:
    """A world's feed of run changes, where it has one."""

    async def watch_runs(self, on_change: Callable[[str], None]) -> RunWatch | None:
        """Call ``on_change(run_id)`` soon after any writer (any process) appends to a run's
        log. A hint, never a promise: the caller reads the run, and resyncs now and then, as a
        change can be missed (a reconnect, a slow consumer) or named twice. Watch before the
        first read, so that a change between the two is not missed. None when this world has
        no feed (the caller then polls)."""
        return None

    def on_ended(self, listener: EndListener) -> Callable[[], None]:
        """Tell ``listener`` of every terminal append this world hears (its own, and on a
        world with ``terminal_hints`` every writer's), and of every time one may have been
        lost. Returns what stops it. The bookkeeping (who waits, what was heard) is the
        listener's, above the seam."""
        raise NotImplementedError(f"{type(self).__name__} does not tell of runs' ends")

    def ends_wanted(self) -> None:
        """A listener began to wait for an end: a world that follows ends only while someone
        waits (SQLite's feed) starts now. The default follows always, or never."""
