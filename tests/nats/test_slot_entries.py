"""The slot entries in the ``<prefix>_slots`` bucket across a rolling update: a take's token is
an extra field beside the holders and leases as workers from before tokens wrote them (their
reader ignores it, and their writes, which drop it, leave the holder open to any take)."""

from __future__ import annotations

import json
from typing import Any

import nats
from tests.nats_fixtures import OpenWorlds
from wayline.worlds.nats.names import kv_key


async def _entry(world: Any, key: str) -> dict[str, Any]:
    nc = await nats.connect(world._options.servers, max_reconnect_attempts=0)
    try:
        kv = await nc.jetstream().key_value(f"{world.prefix}_slots")
        entry = await kv.get(kv_key(key))
        stored: dict[str, Any] = json.loads(entry.value)
        return stored
    finally:
        await nc.close()


async def _put(world: Any, key: str, stored: dict[str, Any]) -> None:
    nc = await nats.connect(world._options.servers, max_reconnect_attempts=0)
    try:
        kv = await nc.jetstream().key_value(f"{world.prefix}_slots")
        await kv.put(kv_key(key), json.dumps(stored).encode())
    finally:
        await nc.close()


async def test_a_token_is_a_field_the_older_reader_ignores(open_nats_world: OpenWorlds) -> None:
    world = await open_nats_world()
    assert (await world.acquire_slot("wf:k", "run1:s1", 1, lease=30, token="t1"))[0]
    stored = await _entry(world, "wf:k")
    assert stored["holders"] == ["run1:s1"]  # the holders and leases, as before tokens
    assert isinstance(stored["leases"]["run1:s1"], float)
    assert stored["tokens"] == {"run1:s1": "t1"}
    await world.release_slot("wf:k", "run1:s1", token="t1")
    assert "tokens" not in await _entry(world, "wf:k")  # no holder: nothing to name


async def test_an_entry_an_older_worker_rewrote_answers_to_any_take(
    open_nats_world: OpenWorlds,
) -> None:
    """An older worker's write keeps the holders and leases and drops the tokens: the holder
    is then renewed and given back by whichever take of it asks, as it was before tokens."""
    world = await open_nats_world()
    assert (await world.acquire_slot("wf:k", "run1:s1", 1, lease=30, token="t1"))[0]
    stored = await _entry(world, "wf:k")
    older = {"key": "wf:k", "holders": stored["holders"], "leases": stored["leases"]}
    await _put(world, "wf:k", older)
    assert await world.renew_slot("wf:k", "run1:s1", lease=30, token="t2")
    await world.release_slot("wf:k", "run1:s1", token="t2")
    assert await world.acquire_slot("wf:k", "run2:s1", 1, lease=30, token="t3") == (
        True,
        ["run2:s1"],
    )
