"""What this process heard of runs' ends: the waiters of a result, and the recent ends.

A world only feeds this (:meth:`World.on_ended`: an end it heard, or that a hint may have been
lost); the bookkeeping is the client's (``Client.ends``), above the seam, and one book serves
every client of a world (:meth:`TerminalHints.of`), so that a client made per call adds no
listener to the world.
"""

from __future__ import annotations

import asyncio
import weakref
from collections import OrderedDict
from collections.abc import Collection

from .ports import ChangeFeed

HEARD_ENDED = 1024
"""Terminal hints remembered per world (run ids), for a result asked after the end."""

_BOOKS: weakref.WeakKeyDictionary[ChangeFeed, TerminalHints] = weakref.WeakKeyDictionary()


class TerminalHints:
    """The ends a world told of, and who waits for one (an :class:`~wayline.world.ports.
    EndListener` of the world)."""

    def __init__(self, world: ChangeFeed) -> None:
        # Weakly: the book of a world is kept in a weak mapping keyed by the world, so a
        # strong reference back would keep every world alive.
        self._world = weakref.ref(world)
        self._waiters: dict[str, set[asyncio.Future[None]]] = {}
        self._heard: OrderedDict[str, None] = OrderedDict()
        self._ends_heard = 0
        self._losses = 0
        world.on_ended(self)

    @classmethod
    def of(cls, world: ChangeFeed) -> TerminalHints:
        """The one book of ``world``, made on first use."""
        book = _BOOKS.get(world)
        if book is None:
            book = _BOOKS[world] = cls(world)
        return book

    def watch(self, run_id: str) -> asyncio.Future[None]:
        """A future set when the world hears that the run may have ended: a hint, never a
        promise (the caller reads the run again). Watch before reading, so that an end
        between the read and the wait is not missed; :meth:`unwatch` after."""
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.setdefault(run_id, set()).add(fut)
        world = self._world()
        if world is not None:
            world.ends_wanted()
        return fut

    def unwatch(self, run_id: str, fut: asyncio.Future[None]) -> None:
        waiters = self._waiters.get(run_id)
        if waiters is not None:
            waiters.discard(fut)
            if not waiters:
                del self._waiters[run_id]

    def waited(self) -> Collection[str]:
        """The runs somebody waits for now."""
        return self._waiters.keys()

    def ended(self, run_id: str) -> None:
        """The world heard a terminal append to the run: its waiters wake."""
        self._ends_heard += 1
        self._heard[run_id] = None
        self._heard.move_to_end(run_id)
        if len(self._heard) > HEARD_ENDED:
            self._heard.popitem(last=False)
        for fut in self._waiters.pop(run_id, ()):
            if not fut.done():
                fut.set_result(None)

    def may_be_lost(self) -> None:
        """A hint may have gone missing (the connection that carries them was lost, or a
        subscriber fell behind): every waiter wakes and reads once, rather than waiting for
        its poll."""
        self._losses += 1
        for waiters in list(self._waiters.values()):
            for fut in waiters:
                if not fut.done():
                    fut.set_result(None)

    def heard_ended(self, run_id: str) -> bool:
        """True when the world told of a terminal hint for the run lately (the last
        :data:`HEARD_ENDED` runs), waiter or not (one of the tests of
        :meth:`may_have_ended_since`)."""
        return run_id in self._heard

    def ends_mark(self) -> tuple[int, int]:
        """Where this book's hearing stands now, for :meth:`may_have_ended_since`."""
        return self._ends_heard, self._losses

    def may_have_ended_since(self, run_id: str, mark: tuple[int, int]) -> bool:
        """False only when the run's end cannot have been heard since ``mark`` (taken when
        the run was known not to have ended) without this book knowing: it heard no hint for
        it, too few ends since to have forgotten one, and no hint was lost. A world that hears
        every end (``hears_every_end``) can then wait for the hint unread."""
        ends, losses = mark
        return (
            self.heard_ended(run_id)
            or self._ends_heard - ends >= HEARD_ENDED
            or self._losses != losses
        )
