"""Writing bytes Wayline never wrote into a world's stores, the way anything that can reach the
store could: a raw NATS client publishing on a run's subject or into a KV bucket, a process
with the SQLite file open inserting rows."""

from __future__ import annotations

import json
import sqlite3
import time
import uuid
from typing import Any

from wayline.world import World
from wayline.worlds.local import LocalWorld


def is_local(world: World) -> bool:
    return isinstance(world, LocalWorld)


async def _nc(world: Any) -> Any:
    import nats

    return await nats.connect(world._options.servers, connect_timeout=2, max_reconnect_attempts=0)


async def poison_log(
    world: World,
    run_id: str,
    data: bytes,
    *,
    type_: str = "hook_received",
    cid: str | None = None,
    move_last: bool = False,
) -> int:
    """Append ``data`` to the run's log behind the world's back; returns the entry's number
    (the stream sequence on NATS, the row's seq on SQLite). On SQLite the row has ``type_``
    and ``cid``, and ``move_last`` moves the run's ``last_seq`` to it, as its own append does."""
    if isinstance(world, LocalWorld):
        db = sqlite3.connect(world.path)
        try:
            (top,) = db.execute(
                "SELECT COALESCE(MAX(seq), 0) FROM events WHERE run_id = ?", (run_id,)
            ).fetchone()
            db.execute(
                "INSERT INTO events (run_id, seq, type, cid, data, created_at) "
                "VALUES (?,?,?,?,?,?)",
                (run_id, top + 1, type_, cid, data, time.time()),
            )
            if move_last:
                db.execute("UPDATE runs SET last_seq = ? WHERE run_id = ?", (top + 1, run_id))
            db.commit()
        finally:
            db.close()
        return int(top + 1)
    nc = await _nc(world)
    try:
        ack = await nc.jetstream().publish(world.names_of(run_id).run_subject(run_id), data)  # type: ignore[attr-defined]
        return int(ack.seq)
    finally:
        await nc.close()


async def forge_event(
    world: World,
    run_id: str,
    type_: str,
    data: dict[str, Any],
    status: str | None = None,
    *,
    cid: str | None = None,
) -> int:
    """Append one well-formed event to the run's log behind the world's back, the way a writer
    that knows the store's layout could: on SQLite the row after the last, with the run's
    ``last_seq`` moved to it (and its ``status``, when given: not a row past the run's end),
    on NATS a message with the next seq (and a run summary saying ``status``, when given).
    Only the check that each entry follows from the ones before it can catch one that does
    not. Returns the entry's number (as ``poison_log``)."""
    info = await world.get_run(run_id)
    assert info is not None
    seq = info.last_seq + 1
    if isinstance(world, LocalWorld):
        db = sqlite3.connect(world.path)
        try:
            db.execute(
                "INSERT INTO events (run_id, seq, type, cid, data, created_at) "
                "VALUES (?,?,?,?,?,?)",
                (run_id, seq, type_, cid, json.dumps(data), time.time()),
            )
            db.execute("UPDATE runs SET last_seq = ? WHERE run_id = ?", (seq, run_id))
            if status is not None:
                db.execute(
                    "UPDATE runs SET status = ?, error = NULL WHERE run_id = ?", (status, run_id)
                )
            db.commit()
        finally:
            db.close()
        return seq
    summary: dict[str, Any] = {}
    if status is not None:
        summary = {
            "runId": run_id,
            "workflow": info.workflow,
            "status": status,
            "attributes": dict(info.attributes),
            "createdAt": info.created_at,
            "startedAt": info.started_at,
            "lastSeq": seq,
        }
    body = {"s": seq, "e": [{"t": type_, "c": cid, "d": data}], "r": summary}
    return await poison_log(world, run_id, json.dumps(body).encode())


async def poison_hook(world: World, token: str, data: bytes) -> None:
    """Overwrite the stored entry of a hook token with ``data`` (SQLite: a row that holds the
    token for a run that does not exist)."""
    if isinstance(world, LocalWorld):
        db = sqlite3.connect(world.path)
        try:
            db.execute("UPDATE hooks SET active = 0 WHERE token = ?", (token,))
            db.execute(
                "INSERT INTO hooks (token, run_id, cid, active, created_at) VALUES (?,?,?,1,?)",
                (token, data, b"\xff" + uuid.uuid4().bytes, time.time()),
            )
            db.commit()
        finally:
            db.close()
        return
    from wayline.worlds.nats.names import kv_key

    nc = await _nc(world)
    try:
        kv = await nc.jetstream().key_value(world.names.hooks_bucket)  # type: ignore[attr-defined]
        await kv.put(kv_key(token), data)
    finally:
        await nc.close()


async def poison_idem(world: World, key: str, data: bytes) -> None:
    """NATS only: overwrite an idempotency key's claim with ``data``."""
    from wayline.worlds.nats.names import kv_key

    nc = await _nc(world)
    try:
        kv = await nc.jetstream().key_value(world.names.idem_bucket)  # type: ignore[attr-defined]
        await kv.put(kv_key(key), data)
    finally:
        await nc.close()


async def poison_run_row(world: World, run_id: str, column: str, value: Any) -> None:
    """SQLite only: set one column of the run's row to ``value``."""
    assert isinstance(world, LocalWorld)
    assert column in ("status", "input", "output", "error", "attributes")
    db = sqlite3.connect(world.path)
    try:
        db.execute(f"UPDATE runs SET {column} = ? WHERE run_id = ?", (value, run_id))
        db.commit()
    finally:
        db.close()
