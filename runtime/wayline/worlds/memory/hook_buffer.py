"""Payloads sent before the wait in the in-memory world: a dictionary keyed by
``(namespace, token)`` (``wayline.world.hook_buffer``). One event loop runs every caller and no
method awaits between its read and its write, so each store or take is atomic, as SQLite's
transaction and NATS's compare-and-set make them in the other worlds."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from ..._core import clock
from ...world.hook_buffer import BufferedPayload, HookBuffer, to_store, to_take


class MemoryHookBuffer(HookBuffer):
    def __init__(self) -> None:
        self.entries: dict[tuple[str, str], BufferedPayload] = {}
        self.now: Callable[[], float] = clock.now
        """The store's clock (``MemoryStore.now``), which the payloads' expiry is measured on."""

    async def store(self, entry: BufferedPayload) -> BufferedPayload:
        await self.sweep()
        key = (entry.namespace, entry.token)
        existing = self.entries.get(key)
        if not to_store(existing, entry, self.now()):
            assert existing is not None
            return existing
        self.entries[key] = entry
        return entry

    async def get(self, namespace: str, token: str) -> BufferedPayload | None:
        return self.entries.get((namespace, token))

    async def take(self, namespace: str, token: str, run_id: str) -> BufferedPayload | None:
        taken = to_take(self.entries.get((namespace, token)), run_id, self.now())
        if taken is not None:
            self.entries[(namespace, token)] = taken
        return taken

    async def give_back(self, entry: BufferedPayload) -> None:
        key = (entry.namespace, entry.token)
        if self.entries.get(key) == entry:
            self.entries[key] = replace(entry, taken_by=None)

    async def sweep(self) -> int:
        now = self.now()
        gone = [key for key, entry in self.entries.items() if entry.expires_at <= now]
        for key in gone:
            del self.entries[key]
        return len(gone)
