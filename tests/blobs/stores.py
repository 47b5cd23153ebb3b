"""Looking into a world's blob store from outside, the way an operator (or an attacker) with
access to the store could: is a blob there, remove one behind the world's back."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from typing import Any

from wayline.world import World
from wayline.world.blobs import OutOfLine
from wayline.worlds.local import LocalWorld


def digest_of(value: Any) -> str:
    """The name a payload is stored under (the sha256 of its compact JSON)."""
    return hashlib.sha256(json.dumps(value, separators=(",", ":")).encode()).hexdigest()


def blobs_of(world: World) -> OutOfLine:
    blobs = getattr(world, "blobs", None)
    assert isinstance(blobs, OutOfLine)
    return blobs


async def stored(world: World, run_id: str, value: Any) -> bool:
    """Whether the store holds ``value`` for the run (read through a fresh look-up, no cache)."""
    return await blobs_of(world).store.get(run_id, digest_of(value)) is not None


async def remove_blob(world: World, run_id: str, value: Any) -> None:
    """Delete the blob of ``value`` behind the world's back."""
    if isinstance(world, LocalWorld):
        db = sqlite3.connect(world.path)
        try:
            db.execute(
                "DELETE FROM blobs WHERE run_id = ? AND digest = ?", (run_id, digest_of(value))
            )
            db.commit()
        finally:
            db.close()
        return
    from tests.hostile.poison import _nc
    from wayline.worlds.nats.blobs import blob_name

    nc = await _nc(world)
    try:
        obs = await nc.jetstream().object_store(f"{world.names.prefix}_blobs")  # type: ignore[attr-defined]
        await obs.delete(blob_name(run_id, digest_of(value)))
    finally:
        await nc.close()


async def event_bytes(world: World, run_id: str) -> int:
    """Bytes of the run's stored log (rows on SQLite, messages on NATS)."""
    if isinstance(world, LocalWorld):
        db = sqlite3.connect(world.path)
        try:
            (n,) = db.execute(
                "SELECT COALESCE(SUM(LENGTH(data)), 0) FROM events WHERE run_id = ?", (run_id,)
            ).fetchone()
        finally:
            db.close()
        return int(n)
    from wayline.worlds.nats.direct import read_subject

    msgs = await read_subject(
        world._nc,  # type: ignore[attr-defined]
        world.names.events_stream,  # type: ignore[attr-defined]
        world.names.run_subject(run_id),  # type: ignore[attr-defined]
        0,
        timeout=5,
        url="test",
    )
    return sum(len(m.data) for m in msgs)
