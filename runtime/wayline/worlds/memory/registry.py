"""The workers' registry of a memory world: the store's served entries, merged as every world
merges them (``wayline.world.registry``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ...world.ports.registry import Registry
from ...world.registry import merge_served
from .store import MemoryStore


class MemoryRegistry(Registry):
    def __init__(self, store: MemoryStore) -> None:
        self.store = store

    async def record_served(self, entries: Sequence[Mapping[str, Any]]) -> None:
        for entry in entries:
            key = str(entry["key"])
            merged = merge_served(self.store.served.get(key), entry)
            if merged is not None:
                self.store.served[key] = _copied(merged)

    async def list_served(self) -> list[dict[str, Any]]:
        return [dict(self.store.served[k]) for k in sorted(self.store.served)]


def _copied(entry: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of a merged entry that shares nothing with it: its values are scalars, and the
    maps and lists ``merge_served`` makes (``workers``, ``versions``, ``drainingWorkers``).
    A JSON round trip did the same, for about 3% of a seed's CPU in the simulator; what
    the other worlds' encodings accept is their contract suite's to test
    (``tests/contract/test_registry*``)."""
    out: dict[str, Any] = {}
    for k, v in entry.items():
        kind = type(v)
        # the exact types first: an ``isinstance`` against the ``Mapping`` ABC is the slow path
        if kind is dict or (kind is not list and isinstance(v, Mapping)):
            out[k] = dict(v)
        elif kind is list or isinstance(v, list):
            out[k] = list(v)
        else:
            out[k] = v
    return out
