"""The NATS world reaches every KV bucket one way (``worlds.nats.buckets.kv_bucket``): opened
by name, created first when it is told how, and a failure is the world's error, never the
client library's. Against the session's nats-server."""

from __future__ import annotations

import uuid

import pytest

from tests.nats_fixtures import OpenWorlds
from wayline.errors import WorldError
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
