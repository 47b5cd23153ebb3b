"""Listings of NATS buckets (real nats-server): the worker registry (``list_served``) lists a
live worker's entry while that worker heartbeats into it, and bytes written into the registry
or the payload store that are not what the world wrote there are passed over, never raised to
the operator, a client, the CLI or a cleanup pass."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest

import wayline
from tests.blobs import flows
from tests.blobs.stores import blobs_of, stored
from tests.nats_fixtures import OpenWorlds
from tests.runtime.harness import settings
from wayline.errors import WorldError, WorldUnavailableError
from wayline.world import registry
from wayline.worlds.nats import direct
from wayline.worlds.nats import registry as nats_registry
from wayline.worlds.nats.names import kv_key

HUGE = b"9" * 400  # a JSON integer no float holds: json.loads reads it, float() overflows


def _entry(worker: str, workflow: str = "wf") -> dict[str, object]:
    now = time.time()
    return {
        "key": f"|{workflow}|id|1",
        "workflow": workflow,
        "identity": "id",
        "revision": 1,
        "queue": None,
        "worker": worker,
        "seenAt": now,
        "liveUntil": now + 60,
    }


async def test_an_entry_rewritten_while_it_is_listed_is_listed(open_nats_world: OpenWorlds) -> None:
    """A second connection keeps heartbeating into one key while the first lists the registry:
    every listing shows the key. The KV client's key listing missed it about once in a
    hundred listings, and the operator took the worker for gone: it wrote every live run's
    status as waiting for a worker, then wrote them back."""
    lister, beating = await open_nats_world(), await open_nats_world()
    await beating.record_served([_entry("w1")])
    stop = asyncio.Event()

    async def heartbeats() -> int:
        n = 0
        while not stop.is_set():
            await beating.record_served([_entry("w1")])
            n += 1
        return n

    task = asyncio.create_task(heartbeats())
    missed = 0
    try:
        for _ in range(1000):
            listed = await lister.list_served()
            if [e.get("workflow") for e in listed] != ["wf"]:
                missed += 1
    finally:
        stop.set()
        beats = await task
    assert beats > 50  # the key was being rewritten all along
    assert missed == 0


async def test_bytes_that_are_not_an_entry_are_passed_over(open_nats_world: OpenWorlds) -> None:
    world = await open_nats_world()
    await world.record_served([_entry("w1", "good")])
    kv = await world._registry.served()
    for i, junk in enumerate(
        [
            b"\xff\xfe not json",
            b"[" * 100_000 + b"]" * 100_000,  # past the interpreter's recursion limit
            b"[1, 2]",
            b'"text"',
            json.dumps({"workflow": "bad", "liveUntil": "soon"}).encode(),
            json.dumps({"workflow": "bad", "liveUntil": True}).encode(),
            json.dumps({"workflow": "bad"}).encode(),
        ]
    ):
        await kv.put(kv_key(f"junk{i}"), junk)
    await kv.put(kv_key("gone"), json.dumps(_entry("w2", "deleted")).encode())
    await kv.delete(kv_key("gone"))
    listed = await world.list_served()
    assert [e["workflow"] for e in listed] == ["good"]
    assert registry.live_served("good", listed) and not registry.live_served("bad", listed)


async def test_a_registry_time_past_any_float_is_passed_over(open_nats_world: OpenWorlds) -> None:
    """An entry whose ``liveUntil`` no float holds (or is not finite) is no entry: every reader
    (the operator's registry loop and status sync, ``waiting_for_worker``, ``runs show``,
    ``schedules add``) took ``float()`` of it and raised OverflowError."""
    world = await open_nats_world()
    await world.record_served([_entry("w1", "good")])
    kv = await world._registry.served()
    await kv.put(kv_key("huge"), b'{"workflow": "bad", "liveUntil": ' + HUGE + b"}")
    await kv.put(kv_key("nan"), b'{"workflow": "bad", "liveUntil": NaN}')
    await kv.put(kv_key("inf"), b'{"workflow": "bad", "liveUntil": Infinity}')
    listed = await world.list_served()
    assert [e["workflow"] for e in listed] == ["good"]
    assert registry.live_served("good", listed) and not registry.live_served("bad", listed)


async def test_a_heartbeat_overwrites_a_time_past_any_float_under_its_own_key(
    open_nats_world: OpenWorlds,
) -> None:
    """Junk under the worker's own key is merged away, not raised on every heartbeat (the
    worker then never heartbeat again, and looked gone)."""
    world = await open_nats_world()
    kv = await world._registry.served()
    await kv.put(kv_key("|good|id|1"), b'{"workers": {"w0": ' + HUGE + b"}}")
    await world.record_served([_entry("w1", "good")])
    assert registry.live_served("good", await world.list_served())
    await kv.put(kv_key("|good|id|1"), b'{"worker": "w0", "liveUntil": ' + HUGE + b"}")
    await world.record_served([_entry("w1", "good")])
    assert registry.live_served("good", await world.list_served())


async def test_a_cleanup_pass_passes_over_junk_in_the_payload_store(
    open_nats_world: OpenWorlds,
) -> None:
    world = await open_nats_world()
    value = "g" * (2 * flows.MIB)
    async with wayline.Worker(world, [flows.echo], settings=settings()):
        run = await wayline.Client(world).start(flows.echo, value)
        assert await run.result(timeout=60) == value
    bucket = blobs_of(world).store.bucket
    js = world._log._js
    for i, junk in enumerate([b"\xff not json", b"[1]", b'{"size": 3}', b'{"name": 7}']):
        await js.publish(f"$O.{bucket}.M.junk{i}", junk)
    assert await stored(world, run.run_id, value)
    assert await world.delete_runs(older_than=0) == 1
    assert not await stored(world, run.run_id, value)


async def test_a_listing_cut_short_by_a_timeout_is_unavailable(
    open_nats_world: OpenWorlds, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the server did not answer in time is unavailable (tried again), not an error:
    the payload store's listing turned it into a plain WorldError."""
    world = await open_nats_world()
    async with wayline.Worker(world, [flows.echo], settings=settings()):
        run = await wayline.Client(world).start(flows.echo, "v" * flows.MIB)
        await run.result(timeout=60)

    async def timed_out(*args: Any, **kwargs: Any) -> Any:
        raise WorldUnavailableError("NATS at x: direct get timed out after 5s", url="x")

    monkeypatch.setattr(direct, "direct_batch", timed_out)
    with pytest.raises(WorldUnavailableError):
        await blobs_of(world).store.names()
    with pytest.raises(WorldUnavailableError):
        await world.list_served()


class _RefusedHere(WorldError):
    """A wayline error other than an unavailability, raised by the stream read below."""

    code = "REFUSED_HERE"


async def test_listing_and_recording_pass_a_wayline_error_as_it_is(
    open_nats_world: OpenWorlds, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``list_served`` and ``record_served`` pass a wayline error from the stream read through
    unchanged (``record_served`` did through ``direct.kv_read``; ``list_served`` re-wrapped any
    error but an unavailability as a plain WORLD_ERROR, losing its class and code)."""
    world = await open_nats_world()
    await world.record_served([_entry("w1", "listed-refused")])

    async def refusing(*args: Any, **kwargs: Any) -> Any:
        raise _RefusedHere("refused by the test")

    monkeypatch.setattr(nats_registry, "last_by_subject", refusing)
    monkeypatch.setattr(direct, "kv_last", refusing)
    with pytest.raises(_RefusedHere) as listed:
        await world.list_served()
    assert listed.value.code == "REFUSED_HERE"
    with pytest.raises(_RefusedHere) as recorded:
        await world.record_served([_entry("w1", "listed-refused")])
    assert recorded.value.code == "REFUSED_HERE"
