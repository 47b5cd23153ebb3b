"""The NATS world reaches every KV bucket one way (``worlds.nats.buckets.kv_bucket``): opened
by name, created first when it is told how, and a failure is the world's error, never the
client library's. Against the session's nats-server."""

from __future__ import annotations

import uuid

import pytest

from tests.nats_fixtures import OpenWorlds
from wayline.errors import WorldError
from wayline.world.hook_buffer import MAX_BUFFER_SECONDS
from wayline.worlds.nats.buckets import Creation, kv_bucket


async def test_a_missing_bucket_is_the_worlds_error_naming_it(
    open_nats_world: OpenWorlds,
) -> None:
    world = await open_nats_world()
    name = f"wayline_missing_{uuid.uuid4().hex[:8]}"
    with pytest.raises(WorldError, match=f"opening bucket {name}"):
        await kv_bucket(world._jetstream(), name, url=world.url)


async def test_creating_twice_opens_the_same_bucket(open_nats_world: OpenWorlds) -> None:
    world = await open_nats_world()
    js, name = world._jetstream(), f"wayline_made_{uuid.uuid4().hex[:8]}"
    made = await kv_bucket(js, name, url=world.url, create=Creation(replicas=1, memory=True))
    await made.put("k", b"v")
    again = await kv_bucket(js, name, url=world.url, create=Creation(replicas=1, memory=True))
    opened = await kv_bucket(js, name, url=world.url)
    assert (await again.get("k")).value == b"v"
    assert (await opened.get("k")).value == b"v"
    await js.delete_key_value(name)


async def test_the_buckets_a_world_needs_are_made_at_start(open_nats_world: OpenWorlds) -> None:
    world = await open_nats_world()
    js = world._jetstream()
    for name in (world.names.hooks_bucket, world.names.idem_bucket, world.names.served_bucket):
        bucket = await kv_bucket(js, name, url=world.url)
        assert (await bucket.status()).bucket == name


@pytest.mark.parametrize("storage", ["memory", "file"])
async def test_the_stores_made_on_first_use_make_their_buckets_each_under_its_name(
    open_nats_world: OpenWorlds, storage: str
) -> None:
    """Concurrency slots, rate buckets and buffered hook payloads each create their bucket on
    first use, ``<prefix>_<store>``, with one value a key, read directly, in the world's
    storage; buffered payloads' keys are dropped a week (``MAX_BUFFER_SECONDS``) after their
    last write, the others' never."""
    world = await open_nats_world(storage=storage)
    assert (await world.acquire_slot("kv-buckets.slot", "h", 1))[0]
    await world.take_token("kv-buckets.rate", 10.0, 1)
    assert await world.hook_buffer().get("kv-buckets", "token") is None
    js, prefix = world._jetstream(), world.names.prefix
    made = {}
    for store in ("slots", "rates", "hookbuf"):
        status = await (await kv_bucket(js, f"{prefix}_{store}", url=world.url)).status()
        config = status.stream_info.config
        assert (status.history, config.allow_direct) == (1, True)
        assert (config.storage, config.num_replicas) == (storage, world.replicas)
        made[store] = status.ttl
    assert made == {"slots": 0.0, "rates": 0.0, "hookbuf": MAX_BUFFER_SECONDS}  # 0: for ever
