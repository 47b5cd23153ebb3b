"""The change-feed port: hear soon that some writer appended to a run's log."""

from __future__ import annotations

from collections.abc import Awaitable, Callable


class RunWatch:
    """A subscription to a world's change feed (:meth:`World.watch_runs`); ``close()`` ends
    it."""

    def __init__(self, close: Callable[[], Awaitable[None]]) -> None:
        self._close = close

    async def close(self) -> None:
        await self._close()


class ChangeFeed:
    """A world's feed of run changes, where it has one."""

    async def watch_runs(self, on_change: Callable[[str], None]) -> RunWatch | None:
        """Call ``on_change(run_id)`` soon after any writer (any process) appends to a run's
        log. A hint, never a promise: the caller reads the run, and resyncs now and then, as a
        change can be missed (a reconnect, a slow consumer) or named twice. Watch before the
        first read, so that a change between the two is not missed. None when this world has
        no feed (the caller then polls)."""
        return None
