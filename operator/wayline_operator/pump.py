"""When to write which resource's status: a scheduler apart from kopf and the world.

Keys (run ids) are *touched* when something says their run may have moved (the world's
change feed, a new or changed resource, a timer) and *synced* (``sync(key)``: read the run,
patch the resource if its status changed; returns whether it patched). The pump

- coalesces: a key touched any number of times before its sync is synced once, and a key
  touched while its sync runs is synced once more afterwards (never twice at once);
- spaces: a key is synced at most once per ``interval`` seconds after a sync that patched;
- bounds: at most ``rate`` patches per second overall (a token bucket of ``rate`` tokens), and
  at most ``concurrency`` syncs at once;
- prefers hot keys (touched by a change) to cold ones (a resync's re-read), oldest first, and
  gives cold ones at most ``cold_concurrency`` of its syncs at once, so a resync of every
  resource never delays the status of a run that just moved: a sweep of thousands of live
  runs neither fills every slot nor takes the process's CPU from the hot keys that follow;
- runs timers: ``touch(key, delay=...)`` syncs it no earlier than that (a resource's TTL);
- stands still while ``paused()`` says so (kopf peering paused this replica: another one
  writes the statuses); touches are kept, and synced once it resumes.
"""

from __future__ import annotations

import asyncio
import heapq
import logging
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass

from wayline.waits import wait_set

log = logging.getLogger("wayline.operator")

Sync = Callable[[str], Awaitable[bool]]


@dataclass
class Counts:
    synced: int = 0
    """Syncs done (each read the run, at least)."""
    patched: int = 0
    """Syncs that wrote a status."""
    failed: int = 0


class Pump:
    def __init__(
        self,
        sync: Sync,
        *,
        interval: float = 1.0,
        rate: float = 100.0,
        concurrency: int = 8,
        cold_concurrency: int | None = None,
        retry_delay: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
        paused: Callable[[], bool] = lambda: False,
        pause_poll: float = 0.25,
    ) -> None:
        self._sync = sync
        self.paused = paused
        self.pause_poll = pause_poll
        self.interval = interval
        self.rate = rate
        self.concurrency = max(1, concurrency)
        cold = self.concurrency // 8 if cold_concurrency is None else cold_concurrency
        self.cold_concurrency = max(1, cold)
        self.retry_delay = retry_delay
        self._clock = clock
        self._hot: dict[str, None] = {}
        self._cold: dict[str, None] = {}
        self._timers: list[tuple[float, str, bool]] = []
        """(due, key, cold): a key keeps its temperature through a timer."""
        self._patched_at: dict[str, float] = {}
        self._running: set[str] = set()
        self._running_cold: set[str] = set()
        self._again: dict[str, bool] = {}
        """Keys touched while their sync ran, and whether every such touch was cold."""
        self._tokens = max(1.0, rate)
        self._filled = clock()
        self._wake = asyncio.Event()
        self._stopped = False
        self.counts = Counts()

    # what callers do ------------------------------------------------------------------------
    def touch(self, key: str, *, delay: float = 0.0, cold: bool = False) -> None:
        """Sync ``key`` soon (``delay`` seconds from now at the earliest)."""
        if delay > 0:
            heapq.heappush(self._timers, (self._clock() + delay, key, cold))
        elif key in self._running:
            self._again[key] = self._again.get(key, True) and cold
        elif cold:
            if key not in self._hot:
                self._cold.setdefault(key)
        else:
            self._cold.pop(key, None)
            self._hot.setdefault(key)
        self._wake.set()

    def touch_all(self, keys: Iterable[str], *, cold: bool = True) -> None:
        for key in keys:
            self.touch(key, cold=cold)

    def forget(self, key: str) -> None:
        """The resource is gone: no sync is due any more (a pending timer finds nothing)."""
        self._hot.pop(key, None)
        self._cold.pop(key, None)
        self._again.pop(key, None)
        self._patched_at.pop(key, None)

    @property
    def backlog(self) -> int:
        return len(self._hot) + len(self._cold)

    def stop(self) -> None:
        """End :meth:`run` without a cancel (a cancel alone ends it too: its wait for a touch
        is ``wait_set``, which never loses one)."""
        self._stopped = True
        self._wake.set()

    # the loop -------------------------------------------------------------------------------
    async def run(self) -> None:
        """Sync touched keys until cancelled or stopped."""
        tasks: set[asyncio.Task[None]] = set()
        try:
            while not self._stopped:
                if self.paused():
                    await asyncio.sleep(self.pause_poll)
                    continue
                self._wake.clear()
                now = self._clock()
                self._promote(now)
                self._refill(now)
                while len(self._running) < self.concurrency and self._tokens >= 1.0:
                    picked = self._next(now)
                    if picked is None:
                        break
                    key, cold = picked
                    self._running.add(key)
                    if cold:
                        self._running_cold.add(key)
                    self._tokens -= 1.0  # reserved; given back if the sync writes nothing
                    task = asyncio.create_task(self._one(key))
                    tasks.add(task)
                    task.add_done_callback(tasks.discard)
                await self._idle(now)
        finally:
            for task in tasks:
                task.cancel()

    def _promote(self, now: float) -> None:
        while self._timers and self._timers[0][0] <= now:
            _, key, cold = heapq.heappop(self._timers)
            self.touch(key, cold=cold)

    def _refill(self, now: float) -> None:
        cap = max(1.0, self.rate)
        self._tokens = min(cap, self._tokens + (now - self._filled) * self.rate)
        self._filled = now

    def _next(self, now: float) -> tuple[str, bool] | None:
        """The next key to sync, and whether it is a cold one."""
        for queue in (self._hot, self._cold):
            cold = queue is self._cold
            while queue and not (cold and len(self._running_cold) >= self.cold_concurrency):
                key = next(iter(queue))
                del queue[key]
                ready = self._patched_at.get(key, -1e18) + self.interval
                if ready > now:  # patched lately: once more when its interval is over
                    heapq.heappush(self._timers, (ready, key, cold))
                    continue
                return key, cold
        return None

    async def _idle(self, now: float) -> None:
        """Wait for a touch, a finished sync, the next timer or the next token."""
        waits = [self._timers[0][0] - now] if self._timers else []
        if self._tokens < 1.0 and (self._hot or self._cold):
            waits.append((1.0 - self._tokens) / max(self.rate, 1e-9))
        timeout = max(0.001, min(waits)) if waits else None
        await wait_set(self._wake, timeout)

    async def _one(self, key: str) -> None:
        try:
            patched = await self._sync(key)
        except asyncio.CancelledError:
            raise
        except Exception as err:  # the world or the API server had trouble: later
            self.counts.failed += 1
            log.warning("status of run %s not written (trying again): %s", key, err)
            # a failed cold sync (a whole resync, when the world is down) comes back cold
            cold = key in self._running_cold
            heapq.heappush(self._timers, (self._clock() + self.retry_delay, key, cold))
        else:
            self.counts.synced += 1
            if patched:
                self.counts.patched += 1
                self._patched_at[key] = self._clock()
            else:
                self._tokens += 1.0
        finally:
            self._running.discard(key)
            self._running_cold.discard(key)
            self._wake.set()
        if key in self._again:
            self.touch(key, cold=self._again.pop(key))
