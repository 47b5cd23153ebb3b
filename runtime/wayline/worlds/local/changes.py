"""How an idle receive of the embedded world hears of a message another process queued.

An enqueue in this process wakes the receivers of its file at once (``queue._WAKERS``); one
made by another process is only seen by looking. Each receiver used to look itself, with two
reads of ``messages`` every poll interval: a worker waits on two topics at least, so an idle
worker made some forty wake-ups and eighty reads a second, about 2 % of a core (the sleeping
runs' figures in ``bench/RESULTS.md``), however many runs slept and however far off their
wakes were. Now one receiver of the file in this process looks, and only at SQLite's
``PRAGMA data_version`` (which changes when another connection commits) and at the test
clock's offset (a time-skipping jump); when either moved it wakes every receiver of the file,
which then reads the queue again. The others wait for that, or for their next message's due
time, or for the end of their receive.

The looker is whichever receiver came first; when its receive ends it wakes one of the
others, which looks next. Each receiver takes its baseline (``Seen``)
before it reads the queue, so a commit made between its read and its wait is a change the
looker still sees.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any

from ..._core import clock
from ...waits import wait_set


@dataclass(frozen=True, slots=True)
class Seen:
    """What a receiver saw before it read the queue: its connection's ``data_version`` and
    the test clock's offset."""

    version: int
    offset: float


class Changes:
    """The one look per poll interval at a file's commits, shared by its receivers in this
    process."""

    def __init__(self) -> None:
        self.looker: asyncio.Task[Any] | None = None
        self.waiting: set[asyncio.Event] = set()
        """The wakers of the receivers waiting while another looks."""

    def _looking(self, loop: asyncio.AbstractEventLoop) -> bool:
        # A looker of a loop that ended without cancelling it (its ``finally`` never ran)
        # looks no more: only a live task of this loop (``loop``, the running one) counts.
        looker = self.looker
        return looker is not None and not looker.done() and looker.get_loop() is loop

    async def wait(
        self,
        waker: asyncio.Event,
        wakers: Callable[[], Collection[asyncio.Event]],
        seen: Seen,
        version: Callable[[], int],
        poll: float,
        timeout: float,
    ) -> None:
        """Return when ``waker`` is set, when ``timeout`` seconds have passed, or (as the
        looker) when the file or the clock changed since ``seen``, after waking the others."""
        deadline = time.monotonic() + timeout
        # Asked for once a wait: each ask of the running loop is a getpid call (issue #39).
        loop = asyncio.get_running_loop()
        while not waker.is_set():
            left = deadline - time.monotonic()
            if left <= 0:
                return
            if self._looking(loop):
                self.waiting.add(waker)
                try:
                    await wait_set(waker, left, loop)  # set by a change, enqueue or hand-over
                finally:
                    self.waiting.discard(waker)
                continue
            self.looker = asyncio.current_task(loop)
            changed = False
            try:
                while not waker.is_set():
                    left = deadline - time.monotonic()
                    if left <= 0:
                        return
                    await wait_set(waker, min(left, poll), loop)
                    if Seen(version(), clock.offset()) != seen:
                        changed = True
                        return
            finally:
                self.looker = None
                if changed:  # every receiver of the file reads the queue again
                    for other in wakers():
                        other.set()
                elif self.waiting:
                    # This look ended with its receive: one waiting receiver is woken, reads
                    # the queue again and looks next (waking them all would have each of
                    # them read the queue at every end of a receive).
                    self.waiting.pop().set()
