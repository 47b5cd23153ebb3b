"""Looking into a world's blob store from outside, the way an operator (or an attacker) with
access to the store could: is a blob there, remove one behind the world's back."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from typing import Any

from wayline._core.events import Event
from wayline.world import World, entries
from wayline.world.blobs import REF, OutOfLine, is_ref
from wayline.worlds.local import LocalWorld


def digest_of(value: Any) -> str:
    """The name a payload is stored under (the sha256 of its compact JSON)."""
    return hashlib.sha256(json.dumps(value, separators=(",", ":")).encode()).hexdigest()


def blobs_of(world: World) -> OutOfLine:
    blobs = getattr(world, "blobs", None)
    assert isinstance(blobs, OutOfLine)
    return blobs


async def incarnations(world: World, run_id: str, value: Any) -> list[str | None]:
    """The incarnations of the run id under which the store names ``value`` (None: named by
    run and digest alone, as SQLite names every blob and NATS did before incarnations)."""
    if isinstance(world, LocalWorld):
        return [None]
    from wayline.worlds.nats.names import subject_token

    token, digest = subject_token(run_id), digest_of(value)
    found: list[str | None] = []
    for name in await blobs_of(world).store.names():  # type: ignore[attr-defined]
        parts = name.split("/")
        if parts[0] == token and parts[-1] == digest:
            found.append(parts[1] if len(parts) == 3 else None)
    return found


async def _get(world: World, run_id: str, digest: str, incarnation: str | None) -> bytes | None:
    store = blobs_of(world).store
    if incarnation is None:
        return await store.get(run_id, digest)
    return await store.get(run_id, digest, incarnation=incarnation)


async def stored(world: World, run_id: str, value: Any) -> bool:
    """Whether the store holds ``value`` for the run, under any of the id's incarnations (read
    through a fresh look-up, no cache)."""
    for incarnation in await incarnations(world, run_id, value):
        if await _get(world, run_id, digest_of(value), incarnation) is not None:
            return True
    return False


async def object_names(world: World, run_id: str, value: Any) -> list[str]:
    """The names of the NATS objects holding ``value`` for the run id."""
    from wayline.worlds.nats.blobs import blob_name

    found = await incarnations(world, run_id, value)
    return [blob_name(run_id, digest_of(value), i) for i in found]


async def object_name(world: World, run_id: str, value: Any) -> str:
    """The name of the one NATS object that this version reads ``value`` of the run id by (the
    one named by an incarnation; the copy without one is for the previous version)."""
    (name,) = [n for n in await object_names(world, run_id, value) if n.count("/") == 2]
    return name


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

    names = await object_names(world, run_id, value)
    assert names, "no such blob"
    nc = await _nc(world)
    try:
        obs = await nc.jetstream().object_store(f"{world.names.prefix}_blobs")  # type: ignore[attr-defined]
        for name in names:
            await obs.delete(name)
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


async def archived_events(world: World, run_id: str) -> list[Event]:
    """The run's events as the archive holds them (``events_archive`` on SQLite, the archive
    stream's copies on NATS), references as they are: what a reader of the archive meets."""
    if isinstance(world, LocalWorld):
        db = sqlite3.connect(world.path)
        try:
            rows = db.execute(
                "SELECT seq, type, cid, data, created_at FROM events_archive WHERE run_id = ? "
                "ORDER BY seq",
                (run_id,),
            ).fetchall()
        finally:
            db.close()
        return [entries.event(run_id, s, t, c, json.loads(d), at) for s, t, c, d, at in rows]
    from wayline.worlds.nats.direct import read_subject

    names = world.names  # type: ignore[attr-defined]
    msgs = await read_subject(
        world._nc,  # type: ignore[attr-defined]
        names.archive_stream,
        names.archive_subject(run_id),
        0,
        timeout=5,
        url="test",
    )
    out: list[Event] = []
    for msg in msgs:
        # the index the archive writes after a run's chunks holds no copies
        for copied in json.loads(msg.data).get("messages", []):
            body = copied["body"]
            for i, e in enumerate(body["e"]):
                out.append(entries.event(run_id, body["s"] + i, e["t"], e.get("c"), e["d"], 0.0))
    return out


async def archived_input(world: World, run_id: str) -> Any:
    """The archived run's input, read through the world's blob store (use a world that has
    cached nothing); the blob its reference names must be stored too."""
    created = (await archived_events(world, run_id))[0]
    ref = created.data["input"]
    assert is_ref(ref)  # stored out of line
    (resolved,) = await blobs_of(world).resolve(run_id, [created])
    # the field spelled out, not imported: it is part of what the store holds
    assert await _get(world, run_id, ref[REF], ref.get("incarnation")) is not None
    return resolved.data["input"]
