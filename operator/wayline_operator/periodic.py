"""A look at each resource of one kind on a cadence, without kopf's timers: a WorkflowSchedule's
tick, a waiting WorkflowHook's retry.

A kopf timer always puts kopf's finalizer on its resource (kopf stops the timer before it lets
the resource go), so every such resource waited for an operator to be deleted, and hung for
good once the operator was uninstalled. kopf also offers no timer without one: a timer on a
resource deleted without a finalizer was never stopped. Here the resources come from the watch
(``seen``, from a kopf ``on.event`` handler): a resource that is deleted, is being deleted, or
is no longer wanted leaves the set at once and is looked at no more; one deleted while no
operator ran is not in the listing a starting operator's watch begins with, so it is never
looked at again. Nothing of it is kept anywhere else to clean up (docs/operator.md, Uninstall).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from wayline.waits import wait_set

log = logging.getLogger("wayline.operator")

Look = Callable[[Mapping[str, Any], Callable[[], bool]], Awaitable[None]]
Exists = Callable[[Mapping[str, Any]], Awaitable[bool]]
"""Whether a resource is still there (asked of the API server)."""
"""A look at one resource: its body, and whether the watch still shows it (it may be deleted
while the look is under way)."""


class Periodic:
    """Calls ``look(body, kept)`` for every resource in the set, each ``interval`` seconds after its
    last look ended (as a kopf timer did), the first look as soon as it joins. One look per
    resource at a time; none while ``paused()`` (another replica works).

    While paused, kopf neither watches nor lists, so a resource deleted then sends no event:
    after a pause, each resource the watch has not shown again is asked of the API server
    (``exists``) before its next look, and dropped if it is gone."""

    def __init__(
        self,
        name: str,
        interval: float,
        look: Look,
        paused: Callable[[], bool],
        exists: Exists | None = None,
    ) -> None:
        self.name, self.interval = name, interval
        self._look, self._paused, self._exists = look, paused, exists
        self._confirmed: set[str] = set()
        """Resources the watch has shown since the last pause."""
        self._bodies: dict[str, Mapping[str, Any]] = {}
        self._due: dict[str, float] = {}
        self._running: set[str] = set()
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._looks: set[asyncio.Task[None]] = set()

    def seen(self, event_type: str | None, body: Mapping[str, Any], wanted: bool) -> None:
        """A watch event of a resource: kept (its latest body) while ``wanted`` and neither
        deleted nor being deleted, dropped otherwise."""
        meta = body.get("metadata") or {}
        uid = str(meta.get("uid"))
        if event_type == "DELETED" or meta.get("deletionTimestamp") or not wanted:
            self._drop(uid)
            return
        self._bodies[uid] = body
        self._confirmed.add(uid)
        if uid not in self._due:
            self._due[uid] = time.monotonic()
            self._wake.set()

    def _drop(self, uid: str) -> None:
        self._bodies.pop(uid, None)
        self._due.pop(uid, None)
        self._confirmed.discard(uid)

    def __contains__(self, uid: object) -> bool:
        return uid in self._bodies

    def start(self) -> None:
        """Start the loop. Called from inside a kopf handler: the tasks then inherit its
        context, which ``kopf.event`` needs to post Events."""
        if self._task is None:
            self._task = asyncio.create_task(self._loop(), name=f"wayline-operator-{self.name}")

    async def close(self) -> None:
        tasks = [t for t in (self._task, *self._looks) if t is not None]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._task = None

    async def _loop(self) -> None:
        while True:
            now = time.monotonic()
            paused = self._paused()
            if paused:
                self._confirmed.clear()
            else:
                for uid, at in list(self._due.items()):
                    if at <= now and uid not in self._running:
                        self._begin(uid)
            soonest = min(
                (at for uid, at in self._due.items() if uid not in self._running),
                default=now + self.interval,
            )
            self._wake.clear()
            # a pause is looked at again within a second, as the sweep does (``handlers``);
            # while paused nothing is begun, so the looks due do not shorten the wait
            wait = min(self.interval, 1.0) if paused else soonest - time.monotonic()
            wait = max(0.0, min(wait, self.interval, 1.0))
            # Not ``asyncio.wait_for``: on Python 3.11 it returns the wake, swallowing the
            # cancel, when ``close`` cancels the loop after the wake was set but before the loop
            # ran again; the loop then went on for good and the operator's shutdown hung until
            # SIGKILL. ``wait_set`` raises the cancel in every case.
            await wait_set(self._wake, wait)

    def _begin(self, uid: str) -> None:
        self._running.add(uid)
        task = asyncio.create_task(self._one(uid), name=f"wayline-operator-{self.name}-look")
        self._looks.add(task)
        task.add_done_callback(self._looks.discard)

    async def _one(self, uid: str) -> None:
        try:
            body = self._bodies.get(uid)
            if body is not None and self._exists is not None and uid not in self._confirmed:
                if not await self._exists(body):
                    self._drop(uid)  # deleted while the watch was paused
                    return
                self._confirmed.add(uid)
            if body is not None:
                await self._look(body, lambda: uid in self._bodies)
        except Exception as err:  # the next look tries again, as kopf retried a timer
            name = (self._bodies.get(uid, {}).get("metadata") or {}).get("name", uid)
            log.warning("%s of %s failed: %s", self.name, name, err)
        finally:
            self._running.discard(uid)
            if uid in self._due:
                self._due[uid] = time.monotonic() + self.interval
            self._wake.set()
