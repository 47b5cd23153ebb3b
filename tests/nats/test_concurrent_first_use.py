"""Buckets and partitions made at once by several processes: on a 3-node JetStream cluster the
creates race (all but the first are answered while the meta leader still places the stream,
which then has no leader for a moment), and on a single server. Every world and task that makes
them at once succeeds, and each is made once, with one configuration (docs/nats.md).

Each test runs a few rounds, each on a fresh prefix: the race does not lose every time."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.nats_fixtures import NatsCluster, NatsServer, require_nats
from wayline.worlds.nats import NatsWorld
from wayline.worlds.nats.provision import recorded_partitions

ROUNDS = 3
TASKS = 3
"""Tasks of each world that first use every bucket at once."""


@pytest.fixture(params=["cluster", "single"])
def servers(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[list[str], int]]:
    """The urls of a fresh 3-node cluster (replicas 3) or of the session's server (1)."""
    if request.param == "single":
        server: NatsServer = request.getfixturevalue("nats_server")
        yield [server.url], 1
        return
    store = tmp_path / "cluster"
    store.mkdir()
    cluster = NatsCluster(require_nats(), store)
    cluster.start()
    try:
        yield cluster.urls, 3
    finally:
        cluster.stop()


def _world(urls: list[str], prefix: str, replicas: int, partitions: int = 1) -> NatsWorld:
    return NatsWorld(
        urls, prefix=prefix, replicas=replicas, partitions=partitions, connect_attempts=5
    )


async def _failures(*calls: Awaitable[Any]) -> list[str]:
    """The errors of ``calls``, run at once (each to its end, whatever the others do)."""
    results = await asyncio.gather(*calls, return_exceptions=True)
    return [repr(r) for r in results if isinstance(r, BaseException)]


async def _close(worlds: list[NatsWorld]) -> None:
    for world in worlds:
        await world.close()


async def _first_uses(world: NatsWorld, tag: str) -> None:
    await world.acquire_slot(f"fu.slot.{tag}", f"holder-{tag}", 2, lease=30.0)
    await world.take_token(f"fu.rate.{tag}", 10.0, 5)
    await world.hook_buffer().get("fu", f"token-{tag}")


async def _bucket_configs(world: NatsWorld, prefix: str) -> dict[str, list[dict[str, Any]]]:
    js = world._jetstream()
    found: dict[str, list[dict[str, Any]]] = {}
    for info in await js.streams_info():
        name = info.config.name
        if name.startswith(f"KV_{prefix}_"):
            config = info.config.as_dict()
            config.pop("created", None)
            found.setdefault(name, []).append(config)
    return found


async def test_buckets_first_used_at_once_by_two_worlds_are_made_once(
    servers: tuple[list[str], int],
) -> None:
    urls, replicas = servers
    for _ in range(ROUNDS):
        prefix = f"fu{uuid.uuid4().hex[:8]}"
        worlds = [_world(urls, prefix, replicas) for _ in range(2)]
        for world in worlds:
            await world.start()
        try:
            uses = [
                _first_uses(world, f"{w}-{t}")
                for w, world in enumerate(worlds)
                for t in range(TASKS)
            ]
            assert await _failures(*uses) == []
            configs = await _bucket_configs(worlds[1], prefix)
            for suffix in ("slots", "rates", "hookbuf"):
                [config] = configs[f"KV_{prefix}_{suffix}"]
                assert config["num_replicas"] == replicas
                assert config["max_msgs_per_subject"] == 1
                assert config["allow_direct"] is True
        finally:
            await _close(worlds)


async def test_worlds_of_two_partitions_started_at_once_agree_on_them(
    servers: tuple[list[str], int],
) -> None:
    urls, replicas = servers
    for _ in range(ROUNDS):
        prefix = f"fp{uuid.uuid4().hex[:8]}"
        worlds = [_world(urls, prefix, replicas, partitions=2) for _ in range(3)]
        try:
            assert await _failures(*(world.start() for world in worlds)) == []
            js = worlds[0]._jetstream()
            assert await recorded_partitions(js, worlds[0].names, urls[0]) == 2
            assert [world.partitions for world in worlds] == [2, 2, 2]
        finally:
            await _close(worlds)


async def test_a_bucket_made_with_another_configuration_still_fails_clearly(
    servers: tuple[list[str], int],
) -> None:
    """A real mismatch is no race: it fails as the world's error naming the bucket, at once
    (not after the wait for a race to settle), and leaves the bucket as it was."""
    from nats.js.api import KeyValueConfig

    from wayline.errors import WorldError, WorldUnavailableError

    urls, replicas = servers
    prefix = f"fm{uuid.uuid4().hex[:8]}"
    world = _world(urls, prefix, replicas)
    await world.start()
    try:
        js = world._jetstream()
        bucket = f"{prefix}_slots"
        await js.create_key_value(KeyValueConfig(bucket=bucket, history=5, replicas=replicas))
        with pytest.raises(WorldError) as caught:
            await world.acquire_slot("fm.slot", "holder", 1)
        assert not isinstance(caught.value, WorldUnavailableError)
        assert f"creating bucket {bucket}" in str(caught.value)
        assert "already in use" in str(caught.value)
        assert (await js.stream_info(f"KV_{bucket}")).config.max_msgs_per_subject == 5
    finally:
        await world.close()
