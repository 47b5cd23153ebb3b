"""A worker's budget of deliveries of one kind handled at once (``flow_concurrency``,
``step_concurrency``), shared by the receive loops of every topic of that kind.

A receive loop takes a slot only once a message is in hand, never for the length of its long
poll. A loop that held the slot through its poll made, with one slot and a workflow's three
flow topics (its pinned route, its unpinned route, the plain topic), the loop whose message
was due wait for the other loops' empty polls (0.5 s each) to end: a run sleeping 0.1 s
between steps advanced about once a second (issues #38, #39). Instead a loop polls only while
a slot is free (:meth:`Slots.until_free`), so an idle worker polls as often as before and a
worker whose every slot is held polls not at all, and takes its slot when its receive answers.
A message that finds no slot free then (another loop's receive took it first) waits in hand
for one (:meth:`Slots.take`), ahead of any new poll: :meth:`Slots.free` counts no slot free
while anyone waits, so the number of messages in hand never grows past what the loops had
received at once. The loops that wait for a free slot keep their places in line while they
wait: a freed slot wakes them in that order, so the loop that waited longest asks its world
first, and a loop whose topic has a backlog, back in line after each message, does not take
every freed slot ahead of the others (with the loops woken by one event, it woke first every
time and starved them).
"""

from __future__ import annotations

import asyncio
import collections


class Slots:
    """``limit`` slots; :meth:`take` waits in arrival order, and a released slot goes to the
    longest waiter before it counts as free again. No slot (``limit`` 0) receives nothing of
    its kind: a worker made to consume only the other kind."""

    def __init__(self, limit: int) -> None:
        if limit < 0:
            raise ValueError(f"a count of slots cannot be negative: {limit}")
        self.limit = limit
        self.taken = 0
        """Slots held: never above ``limit``."""
        self._waiters: collections.deque[asyncio.Future[None]] = collections.deque()
        self._polls: collections.deque[list[asyncio.Future[None]]] = collections.deque()
        """The loops waiting in :meth:`until_free`, longest first: each one's place in line
        holds the future its next wake sets."""

    def free(self) -> int:
        """Slots a new receive may fill: none while a message in hand waits for one."""
        if any(not w.done() for w in self._waiters):
            return 0
        return self.limit - self.taken

    def take_now(self, count: int) -> int:
        """Take up to ``count`` free slots without waiting; how many were taken."""
        got = max(0, min(count, self.free()))
        self.taken += got
        return got

    async def take(self) -> None:
        """Take a slot, waiting behind earlier waiters if none is free."""
        if self.take_now(1):
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self.release()  # handed this slot as the cancel came: passed on, not lost
            self._wake_polls()  # a poll that waited behind this waiter looks again
            raise
        finally:
            if waiter in self._waiters:
                self._waiters.remove(waiter)

    def release(self) -> None:
        """Give a slot back: to the longest waiter, else free for the next receive."""
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)  # the slot changes hands: ``taken`` stays
                return
        if self.taken < 1:
            raise RuntimeError("a slot was released that was never taken")
        self.taken -= 1
        self._wake_polls()

    def _wake_polls(self) -> None:
        """Wake every loop waiting for a free slot, longest-waiting first."""
        for place in self._polls:
            if not place[0].done():
                place[0].set_result(None)

    async def until_free(self) -> None:
        """Return once a slot is free (at once if one is), taking none. A loop that finds the
        slot taken again when it wakes waits on in the same place in line."""
        if self.free() >= 1:
            return
        loop = asyncio.get_running_loop()
        place = [loop.create_future()]
        self._polls.append(place)
        try:
            while True:
                await place[0]
                if self.free() >= 1:
                    return
                place[0] = loop.create_future()
        finally:
            self._polls.remove(place)
