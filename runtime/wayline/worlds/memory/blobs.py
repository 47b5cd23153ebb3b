"""Blobs of a memory world: the store's bytes, a digest a run's."""

from __future__ import annotations

from ...world.ports.blobs import BlobRef, digest_of
from .store import MemoryStore


class MemoryBlobs:
    def __init__(self, store: MemoryStore) -> None:
        self.store = store

    async def put_blob(self, run_id: str, data: bytes) -> BlobRef:
        digest = digest_of(data)
        self.store.blobs.setdefault((run_id, digest), (bytes(data), self.store.now()))
        return BlobRef(digest, len(data))

    async def get_blob(self, run_id: str, ref: BlobRef) -> bytes | None:
        found = self.store.blobs.get((run_id, ref.digest))
        return None if found is None else found[0]
