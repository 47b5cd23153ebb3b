"""Which fair lane a fairness key's work goes to: its own, while a level has a lane free.

A lane (``names.FAIR_LANES`` a level) is one subject and one consumer, and a consumer hands out
its messages first in, first out, so two keys in one lane are served first in, first out
between them: the lanes get fair turns, the keys inside one do not. A hash alone puts two keys
in one lane with chance 1 / 8 (tenant B's 10 runs behind tenant A's 10,000, measured in
``bench/RESULTS.md``). So an enqueue looks at the first message stored on each lane of the
level (one direct get each, all at once) and sends the key's work to, in this order:

1. the lane this process last sent the key's work to, while that work may still be queued
   there (the lane's first stored message is not younger than it): a key that waits behind
   another key's work in its home lane, past eight keys, keeps that lane when another one
   frees, or its later work would be served before its earlier;
2. a lane whose first stored message is of this key, the key's home lane (``lane_of``) first
   and then the next ones in turn: a key keeps the lane its earlier work is queued on, so its
   own work stays first in, first out;
3. else the first empty lane from its home lane on (linear probing);
4. else its home lane: more keys are queued at the level than it has lanes, and keys then share
   lanes as before.

A process reads the lanes of a level at most every ``CHOICE_SECONDS`` and gives keys lanes from
that view, marking a lane it gives a new key as that key's (so a burst of starts, of one key or
of many, asks eight direct gets a second, not eight a start). Two processes that choose at
once for two new keys may both take one empty lane, and a key whose lane empties and is taken
by another process's key within that time shares it until the next read: the keys then share
the lane, as with a hash alone. A send that cannot read the lanes (the server electing a
leader, or a read that times out) goes to the key's home lane, as before the choice, rather
than fail; the sends that waited for that read go there too instead of each reading again in
turn (a burst would otherwise wait one timeout a send), and the next send reads again.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

from ..._core import ordering
from ...errors import WorldError
from ...world import entries
from .direct import StoredMsg
from .names import FAIR_LANES, lane_of

log = logging.getLogger("wayline.worlds.nats")

CHOICE_SECONDS = 1.0
"""How long one process gives lanes from one read of a level's lanes before reading again."""


def key_of(msg: StoredMsg | None) -> str | None:
    """The fairness key a lane's first stored message carries: None for an empty lane, ``""``
    for a message without a key or not a payload this world wrote (the lane is taken, by no
    key that could ever match)."""
    if msg is None:
        return None
    try:
        payload = entries.loads(msg.data)
    except entries.Unreadable:
        return ""
    if not isinstance(payload, dict):
        return ""
    return ordering.of_payload(payload).fairness_key


def choose(key: str, holders: list[str | None]) -> int:
    """The lane of ``key`` given the key of the first message stored on each lane of its
    level (``key_of``: None for an empty lane), by the rules of the module docstring."""
    home = lane_of(key)
    order = [(home + i) % FAIR_LANES for i in range(FAIR_LANES)]
    for lane in order:
        if holders[lane] == key:
            return lane
    for lane in order:
        if holders[lane] is None:
            return lane
    return home


class LaneChoice:
    """One process's view of which key holds each lane of a level, read at most every
    ``CHOICE_SECONDS``, and the lanes it gives keys from it."""

    def __init__(self, first: Callable[[str, str], Awaitable[StoredMsg | None]]) -> None:
        self._first = first
        """The first message stored on one kind of a topic (``topic``, ``kind``), or None."""
        self._views: dict[tuple[str, int], tuple[list[str | None], float]] = {}
        self._heads: dict[tuple[str, int], list[int]] = {}
        """The sequence of the first message stored on each lane of a level at the last read
        (0: empty)."""
        self._sent: dict[tuple[str, int, str], tuple[int, int]] = {}
        """The lane this process last sent a key's work to at a level, and its sequence."""
        self._locks: dict[tuple[str, int], asyncio.Lock] = {}
        self._failed: dict[tuple[str, int], tuple[float, WorldError]] = {}
        """The last failed read of a level (when it ended, why): it answers every send that
        waited for it, so a burst meeting a read that times out waits for one read, not one a
        send in turn."""

    async def kind(self, topic: str, priority: int, key: str) -> str:
        """The subject token (``names.kind_of``) of the lane ``key``'s work at ``priority``
        goes to on ``topic``."""
        try:
            view = await self._view(topic, priority)
        except WorldError as err:
            # The read is a hint: a send that cannot make it goes to the key's home lane, as
            # before the choice, rather than fail (the publish meets the same server next and
            # fails on its own if the server is gone).
            log.warning("could not read the lanes of topic %r, level %d: %s", topic, priority, err)
            return f"p{priority}f{lane_of(key)}"
        holders = view[0]
        lane = choose(key, holders)
        last = self._sent.get((topic, priority, key))
        heads = self._heads.get((topic, priority))
        if last is not None and heads is not None and 0 < heads[last[0]] <= last[1]:
            lane = last[0]  # the key's last work may still wait there: after it, not beside
        if holders[lane] is None:
            # the lane holds this key's work now: the next new key of this view looks further
            holders[lane] = key
        return f"p{priority}f{lane}"

    async def _view(self, topic: str, priority: int) -> tuple[list[str | None], float]:
        """The holders of the level's lanes, read again once ``CHOICE_SECONDS`` old. One read
        at a time per level: the hundred sends of a burst that find the view out of date wait
        for one read, instead of each asking the eight lanes."""
        key = (topic, priority)
        asked = time.monotonic()
        view = self._views.get(key)
        if view is not None and view[1] > asked:
            return view
        async with self._locks.setdefault(key, asyncio.Lock()):
            now = time.monotonic()
            view = self._views.get(key)
            if view is not None and view[1] > now:
                return view
            failed = self._failed.get(key)
            if failed is not None and failed[0] >= asked:
                raise failed[1]  # the read this send waited for failed: not asked again
            try:
                firsts = await asyncio.gather(
                    *(self._first(topic, f"p{priority}f{lane}") for lane in range(FAIR_LANES))
                )
            except WorldError as err:
                self._failed[key] = (time.monotonic(), err)
                raise
            self._failed.pop(key, None)
            if len(self._views) > 10_000:  # topics come and go: forget what has run out
                self._views = {k: v for k, v in self._views.items() if v[1] > now}
                self._locks = {k: v for k, v in self._locks.items() if k in self._views}
                self._failed = {k: v for k, v in self._failed.items() if k in self._locks}
                self._heads = {k: v for k, v in self._heads.items() if k in self._views}
            view = self._views[key] = ([key_of(m) for m in firsts], now + CHOICE_SECONDS)
            self._heads[key] = [0 if m is None else m.seq for m in firsts]
            return view

    def sent(self, topic: str, kind: str, key: str, seq: int) -> None:
        """Note that ``key``'s work was stored as message ``seq`` on lane ``kind``
        (``p<level>f<lane>``) of ``topic``."""
        priority, _, lane = kind[1:].partition("f")
        if not lane:
            return
        if len(self._sent) > 100_000:  # keys come and go: a forgotten key shares as before
            self._sent.clear()
        self._sent[(topic, int(priority), key)] = (int(lane), seq)
