"""The embedded world's change feed: every append renumbers its run's row in ``run_feed``
(see ``schema``); a follower reads the rows above its high-water mark every poll interval and
names each run once per read, however many appends it missed in between."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Sequence
from typing import Any

from ...errors import WorldError
from ...world import RunWatch

log = logging.getLogger("wayline.worlds.local")

_BATCH = 5000
"""Rows per read: a follower far behind catches up in several reads, not one large one."""

Read = Callable[[str, Sequence[Any]], list[Any]]


async def follow(read: Read, on_change: Callable[[str], None], interval: float) -> RunWatch:
    """Start following from now (the current high-water mark) and return the watch."""
    mark = int(read("SELECT COALESCE(MAX(gseq), 0) FROM run_feed", ())[0][0])
    task = asyncio.create_task(_poll(read, on_change, interval, mark), name="wayline-run-feed")

    async def close() -> None:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    return RunWatch(close)


async def _poll(read: Read, on_change: Callable[[str], None], interval: float, mark: int) -> None:
    while True:
        try:
            rows = read(
                "SELECT gseq, run_id FROM run_feed WHERE gseq > ? ORDER BY gseq LIMIT ?",
                (mark, _BATCH),
            )
        except WorldError as err:  # locked for longer than busy_timeout: try again
            log.warning("reading the change feed failed: %s", err)
            rows = []
        for gseq, run_id in rows:
            mark = gseq
            on_change(run_id)
        if len(rows) < _BATCH:
            await asyncio.sleep(interval)
