"""A step's concurrency slot under a network partition: the holder of a ``max=1`` slot (lease
3 s) reaches nats-server through toxiproxy, which cuts it off for 9 s mid-body; a second worker,
connected directly, has a run waiting for the same key. The holder cannot renew, so its lease
runs out and the waiting run takes the slot: the holder must have stopped its body before then.
Both workers run in this process, so every body's start and stop are on one monotonic clock."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

import wayline
from tests.nats_fixtures import NatsServer, wait_reconnected
from tests.runtime import slot_flows as sf
from tests.runtime.flows import lines
from tests.runtime.harness import of_type, settings, wait_for
from tests.toxiproxy import Toxiproxy
from wayline._core.events import EventType
from wayline.worlds.nats import NatsWorld

PARTITION = 9.0
BODY = 10.0
VISIBILITY = 30.0
"""The delivery's own fence trips after half of this without a renewal: well after the slot's
lease (3 s) runs out, so only the slot's fence can stop the holder in time."""


async def test_a_cut_off_slot_holder_stops_before_its_lease_can_be_taken(
    nats_server: NatsServer, toxiproxy: Toxiproxy, tmp_path: Path
) -> None:
    path = str(tmp_path / "marks")
    link = toxiproxy.proxy(nats_server.url)
    prefix = "p" + uuid.uuid4().hex[:10]

    def world(url: str) -> NatsWorld:
        return NatsWorld(url, prefix=prefix, visibility_seconds=VISIBILITY, reconnect_time_wait=0.2)

    cut_off, direct, own = world(link.url), world(nats_server.url), world(nats_server.url)
    flows: list[Any] = [sf.held_one]
    try:
        for w in (cut_off, direct, own):
            await w.start()
        client = wayline.Client(own)
        async with wayline.Worker(cut_off, flows, settings=settings()):
            holding = await client.start(sf.held_one, path, "a", BODY)
            await wait_for(lambda: _started(path, "a"), timeout=20)  # only it could take it
            async with wayline.Worker(direct, flows, settings=settings()):
                link.disable()
                try:
                    # started once the holder is cut off: only the direct worker receives it
                    waiting = await client.start(sf.held_one, path, "b", 1.0)
                    await asyncio.sleep(PARTITION)
                finally:
                    link.enable()
                await wait_reconnected(cut_off, timeout=30)
                results = [await h.result(timeout=90) for h in (holding, waiting)]
        events = await holding.events()
    finally:
        for w in (own, direct, cut_off):
            await w.close()
    assert sf.overlaps(path) == [], sf.spans(path)
    assert results == ["a attempt 2", "b attempt 1"]
    assert [what for _, _, what in sf.spans(path) if what.startswith("a ")] == [
        "a 1 cut",
        "a 2 end",
    ]
    [retrying] = of_type(events, EventType.STEP_RETRYING)
    assert retrying.data["error"]["code"] == "INVOCATION_FENCED"


async def _started(path: str, tag: str) -> bool:
    return any(line.startswith(f"start {tag} ") for line in lines(path))
