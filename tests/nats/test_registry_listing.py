"""The worker registry as NATS lists it (``list_served``, real nats-server): a live worker's
entry is listed while that worker heartbeats into it, and bytes written into the bucket that
are not an entry are passed over, never raised to the operator, a client or the CLI."""

from __future__ import annotations

import asyncio
import json
import time

from tests.nats_fixtures import OpenWorlds
from wayline.world import registry
from wayline.worlds.nats.names import kv_key


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
    kv = await world._served()
    for i, junk in enumerate(
        [
            b"\xff\xfe not json",
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
