"""The registry port: which workers serve which definitions (``world.registry``)."""

from __future__ import annotations

import abc
from collections.abc import Mapping, Sequence
from typing import Any


class Registry(abc.ABC):
    """Workers' heartbeats, one merged entry per definition they serve."""

    @abc.abstractmethod
    async def record_served(self, entries: Sequence[Mapping[str, Any]]) -> None:
        """A worker's heartbeat (or its withdrawal on a graceful close): merge one entry per
        definition it serves into the stored one, by ``key``, with ``registry.merge_served``,
        atomically (workers of one definition share its key). Entries are never removed."""

    @abc.abstractmethod
    async def list_served(self) -> list[dict[str, Any]]:
        """Every entry ever recorded (live or not: see its ``liveUntil``)."""

    async def held_deliveries(self, now: float) -> dict[str, int | None]:
        """Each worker live at ``now`` (the world's time) with the deliveries it held at its
        last heartbeat, None where its heartbeats do not say (``registry.held_by_worker``).
        Every world derives it from its entries, so it cannot differ between them."""
        from ..registry import held_by_worker

        return held_by_worker(await self.list_served(), now)
