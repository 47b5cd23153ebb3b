"""World contract, the hook-payload port: the store of payloads sent before the wait. A take
is atomic (of many racing takers exactly one gets the entry), an expired entry is never taken,
a taken one is kept (for a repeated delivery id) until it expires, and bytes in the store that
are not an entry are passed over, never raised to a worker."""

from __future__ import annotations

import asyncio
import json

import pytest

from wayline.errors import HookBufferOccupiedError
from wayline.world import World
from wayline.world.hook_buffer import BufferedPayload


def _entry(world: World, token: str, entry_id: str = "e1", ttl: float = 60.0) -> BufferedPayload:
    now = world.now()
    return BufferedPayload("ns", token, entry_id, {"v": token}, now, now + ttl)


async def test_of_racing_takers_exactly_one_gets_the_entry(world: World) -> None:
    store = world.hook_buffer()
    await store.store(_entry(world, "t"))
    takes = await asyncio.gather(*(store.take("ns", "t", f"run-{i}") for i in range(16)))
    won = [t for t in takes if t is not None]
    assert len(won) == 1
    assert won[0].payload == {"v": "t"}
    assert (await store.get("ns", "t")) == won[0]
    assert await store.take("ns", "t", "late") is None


async def test_an_entry_is_keyed_by_namespace_and_token(world: World) -> None:
    store = world.hook_buffer()
    await store.store(_entry(world, "t"))
    assert await store.take("other", "t", "run") is None
    assert await store.take("ns", "u", "run") is None
    assert await store.take("ns", "t", "run") is not None


async def test_a_second_payload_is_refused_and_the_same_one_is_stored_once(world: World) -> None:
    store = world.hook_buffer()
    first = await store.store(_entry(world, "t", "e1"))
    assert await store.store(_entry(world, "t", "e1")) == first
    with pytest.raises(HookBufferOccupiedError):
        await store.store(_entry(world, "t", "e2"))
    taken = await store.take("ns", "t", "run")
    assert taken is not None
    assert await store.store(_entry(world, "t", "e1")) == taken  # a retry: still the taken one
    fresh = await store.store(_entry(world, "t", "e3"))  # the token is free again
    assert fresh.entry_id == "e3" and fresh.taken_by is None


async def test_an_expired_entry_is_not_taken_and_is_swept(world: World) -> None:
    store = world.hook_buffer()
    await store.store(_entry(world, "t", ttl=0.05))
    await asyncio.sleep(0.1)
    assert await store.take("ns", "t", "run") is None
    assert await store.sweep() == 1
    assert await store.get("ns", "t") is None


async def test_a_take_given_back_can_be_taken_again(world: World) -> None:
    store = world.hook_buffer()
    await store.store(_entry(world, "t"))
    taken = await store.take("ns", "t", "run-1")
    assert taken is not None
    await store.give_back(taken)
    again = await store.take("ns", "t", "run-2")
    assert again is not None and again.taken_by == "run-2"


async def test_bytes_that_are_not_an_entry_are_passed_over(world: World) -> None:
    if type(world).__name__ == "MemoryWorld":
        pytest.skip("the in-memory world keeps entries as values: nobody can write bytes there")
    await _write_foreign(world, "ns", "t", b"\xff not json")
    store = world.hook_buffer()
    assert await store.get("ns", "t") is None
    assert await store.take("ns", "t", "run") is None
    stored = await store.store(_entry(world, "t"))  # the rightful writer replaces them
    assert await store.get("ns", "t") == stored
    await _write_foreign(world, "ns", "u", json.dumps({"token": 5}).encode())
    assert await store.take("ns", "u", "run") is None


async def _write_foreign(world: World, namespace: str, token: str, raw: bytes) -> None:
    """Write ``raw`` where the world keeps the entry for the key, as a stranger could."""
    from wayline.worlds.local import LocalWorld

    if isinstance(world, LocalWorld):

        def tx(db: object) -> None:
            db.execute(  # type: ignore[attr-defined]
                "INSERT OR REPLACE INTO hook_buffer VALUES (?,?,?,?)",
                (namespace, token, raw, world.now() + 60),
            )

        world._write(tx)
        return
    from wayline.worlds.nats.hook_buffer import _key

    kv = await world.hook_buffer()._bucket()  # type: ignore[attr-defined]
    await kv.put(_key(namespace, token), raw)
