"""In-process single-flight for step bodies (seed 000, "Why in-process single-flight is a
required layer").

Keyed ``runId:correlationId``. The first caller runs; a concurrent caller awaits the winner's
settlement, success or failure, and only then reports ``executed=False`` so its message is acked
without running the body. It never returns early: a crash after an early ack could orphan the
step with no message left to drive it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TypeVar

from ..metrics import SINGLE_FLIGHT_ABSORPTIONS

T = TypeVar("T")

log = logging.getLogger("wayline.runtime")


class SingleFlight:
    def __init__(self) -> None:
        self._inflight: dict[str, asyncio.Future[None]] = {}
        self._turns: dict[str, tuple[asyncio.Lock, list[int]]] = {}

    @contextlib.asynccontextmanager
    async def turn(self, key: str) -> AsyncIterator[None]:
        """One holder at a time for ``key`` in this process, in arrival order (writers of one
        run's log that would otherwise refuse each other's conditional appends)."""
        lock, users = self._turns.get(key) or self._turns.setdefault(key, (asyncio.Lock(), [0]))
        users[0] += 1
        try:
            async with lock:
                yield
        finally:
            users[0] -= 1
            if not users[0]:
                self._turns.pop(key, None)

    def busy(self, key: str) -> bool:
        return key in self._inflight

    async def run(
        self,
        key: str,
        execute: Callable[[], Awaitable[T]],
        loop: asyncio.AbstractEventLoop | None = None,
    ) -> tuple[bool, T | None]:
        """Run ``execute`` unless ``key`` is in flight; returns ``(executed, result)``.
        ``loop``: the running loop, if the caller holds it (None asks for it)."""
        existing = self._inflight.get(key)
        if existing is not None:
            SINGLE_FLIGHT_ABSORPTIONS.inc()
            log.warning(
                "single-flight absorbed a would-be duplicate execution of %s; a burst of these "
                "means leases expire under live executions (raise "
                "WORKFLOW_INLINE_OWNERSHIP_LEASE_SECONDS)",
                key,
            )
            await asyncio.shield(existing)
            return False, None
        done: asyncio.Future[None] = (loop or asyncio.get_running_loop()).create_future()
        self._inflight[key] = done
        try:
            return True, await execute()
        finally:
            del self._inflight[key]
            done.set_result(None)
