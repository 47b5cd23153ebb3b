"""Which fair lane a fairness key's work goes to: its own, while a level has a lane free.

A lane (``names.FAIR_LANES`` a level) is one subject and one consumer, and a consumer hands out
its messages first in, first out, so two keys in one lane are served first in, first out
between them: the lanes get fair turns, the keys inside one do not. A hash alone puts two keys
in one lane with chance 1 / 8 (tenant B's 10 runs behind tenant A's 10,000, measured in
``bench/RESULTS.md``). So an enqueue looks at the first message stored on each lane of the
level (one direct get each, all at once) and sends the key's work to, in this order:

1. a lane whose first stored message is of this key, the key's home lane (``lane_of``) first
   and then the next ones in turn: a key keeps the lane its earlier work is queued on, so its
   own work stays first in, first out;
2. else the first empty lane from its home lane on (linear probing);
3. else its home lane: more keys are queued at the level than it has lanes, and keys then share
   lanes as before.

Two processes that choose at once for two new keys may both take one empty lane: the keys then
share it, as with a hash alone. The choice is remembered for ``CHOICE_SECONDS`` (so a burst of
one key's starts asks once, not once a start); a lane that empties and is taken by another
key within that time is shared by the two until then.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

from ..._core import ordering
from ...world import entries
from .direct import StoredMsg
from .names import FAIR_LANES, lane_of

CHOICE_SECONDS = 1.0
"""How long one process keeps a key's lane without asking again: a start burst of one key (a
hundred starts at once) costs eight direct gets a second, not eight a start."""


def key_of(msg: StoredMsg) -> str | None:
    """The fairness key a stored message's payload carries (None: not a payload this world
    wrote, or one without a key)."""
    try:
        payload = entries.loads(msg.data)
    except entries.Unreadable:
        return None
    if not isinstance(payload, dict):
        return None
    return ordering.of_payload(payload).fairness_key or None


def choose(key: str, firsts: list[StoredMsg | None]) -> int:
    """The lane of ``key`` given the first message stored on each lane of its level (None for
    an empty lane), by the rules of the module docstring."""
    home = lane_of(key)
    order = [(home + i) % FAIR_LANES for i in range(FAIR_LANES)]
    for lane in order:
        first = firsts[lane]
        if first is not None and key_of(first) == key:
            return lane
    for lane in order:
        if firsts[lane] is None:
            return lane
    return home


class LaneChoice:
    """One process's choices of lanes, each kept ``CHOICE_SECONDS``."""

    def __init__(self, first: Callable[[str, str], Awaitable[StoredMsg | None]]) -> None:
        self._first = first
        """The first message stored on one kind of a topic (``topic``, ``kind``), or None."""
        self._chosen: dict[tuple[str, int, str], tuple[int, float]] = {}

    async def kind(self, topic: str, priority: int, key: str) -> str:
        """The subject token (``names.kind_of``) of the lane ``key``'s work at ``priority``
        goes to on ``topic``."""
        now = time.monotonic()
        chosen = self._chosen.get((topic, priority, key))
        if chosen is not None and chosen[1] > now:
            return f"p{priority}f{chosen[0]}"
        firsts = await asyncio.gather(
            *(self._first(topic, f"p{priority}f{lane}") for lane in range(FAIR_LANES))
        )
        lane = choose(key, list(firsts))
        if len(self._chosen) > 10_000:  # keys come and go: forget what has run out
            self._chosen = {k: v for k, v in self._chosen.items() if v[1] > now}
        self._chosen[(topic, priority, key)] = (lane, now + CHOICE_SECONDS)
        return f"p{priority}f{lane}"
