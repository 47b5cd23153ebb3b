"""Concurrency slots of a memory world: the store's slots, a holder's one held while its
run is live or until its lease runs out."""

from __future__ import annotations

from ...world.ports.slots import Slots
from .store import MemoryStore, Slot


class MemorySlots(Slots):
    def __init__(self, store: MemoryStore) -> None:
        self.store = store

    async def acquire_slot(
        self,
        key: str,
        holder: str,
        limit: int,
        *,
        lease: float | None = None,
        token: str | None = None,
    ) -> tuple[bool, list[str]]:
        now = self.store.now()
        slots = self.store.slots.setdefault(key, {})
        for name, slot in list(slots.items()):
            if slot.expires_at is not None and slot.expires_at <= now:
                del slots[name]
            elif slot.expires_at is None:
                info = self.store.runs.get(name)
                if info is None or info.status.terminal:
                    del slots[name]  # a run's slot is held while the run is live
        holders = sorted(slots, key=lambda name: (slots[name].acquired_at, name))
        until = None if lease is None else now + lease
        if holder in holders:
            if until is not None:  # taken again: the lease and the take's token are new
                slots[holder].expires_at = until
                slots[holder].token = token
            return True, holders
        if len(holders) >= limit:
            return False, holders
        slots[holder] = Slot(now, until, token if until is not None else None)
        return True, [*holders, holder]

    async def renew_slot(
        self, key: str, holder: str, *, lease: float, token: str | None = None
    ) -> bool:
        now = self.store.now()
        slot = self.store.slots.get(key, {}).get(holder)
        if slot is None or slot.expires_at is None or slot.expires_at <= now:
            return False
        if not _same_take(slot, token):
            return False
        slot.expires_at = now + lease
        return True

    async def release_slot(self, key: str, holder: str, *, token: str | None = None) -> None:
        slots = self.store.slots.get(key, {})
        slot = slots.get(holder)
        if slot is not None and _same_take(slot, token):
            del slots[holder]


def _same_take(slot: Slot, token: str | None) -> bool:
    """A renewal or give-back acts on the take that holds the slot now; no token on either
    side matches any (as the other worlds do)."""
    return slot.token is None or token is None or slot.token == token
