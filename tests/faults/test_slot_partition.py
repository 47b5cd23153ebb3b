"""A step's concurrency slot under a network partition: the holder of a ``max=1`` slot (lease
3 s) reaches nats-server through toxiproxy, which cuts it off for 9 s mid-body; a second worker,
connected directly, has a run waiting for the same key. The holder cannot renew, so its lease
runs out and the waiting run takes the slot: the holder must have stopped its body before then.
Both workers run in this process, so every body's start and stop are on one monotonic clock."""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import wayline
from tests.nats_fixtures import NatsServer, wait_reconnected
from tests.runtime import slot_flows as sf
from tests.runtime.flows import lines
from tests.runtime.harness import of_type, settings, wait_for
from tests.toxiproxy import Proxy, Toxiproxy
from wayline._core.events import EventType
from wayline._engine import step_slots
from wayline.worlds.nats import NatsWorld

PARTITION = 9.0
BODY = 10.0
VISIBILITY = 30.0
"""The delivery's own fence trips after half of this without a renewal: well after the slot's
lease (3 s) runs out, so only the slot's fence can stop the holder in time."""


@pytest.mark.parametrize("how", ["disabled", "blackholed"])
async def test_a_cut_off_slot_holder_stops_before_its_lease_can_be_taken(
    nats_server: NatsServer,
    toxiproxy: Toxiproxy,
    tmp_path: Path,
    how: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The link is cut by disabling the proxy (connections closed, new ones refused) or by a
    blackhole (``timeout`` toxics both ways: connections stay open, no byte gets through). The
    holder's worker runs one step at a time, so the waiting run's step is the direct worker's,
    and waiting (``blocked``) before the cut. Its delivery, received before the lost
    connection, is not provably its own after it: the retry it records cannot be handed back
    (that could release another holder's delivery), so it waits for the delivery's visibility,
    and the worker says so rather than leave only its "will be retried in 0.0s"."""
    caplog.set_level(logging.INFO, logger="wayline.runtime")
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
        async with wayline.Worker(cut_off, flows, step_concurrency=1, settings=settings()):
            holding = await client.start(sf.held_one, path, "a", BODY)
            await wait_for(lambda: _started(path, "a"), timeout=20)  # only it could take it
            async with wayline.Worker(direct, flows, settings=settings()):
                waiting = await client.start(sf.held_one, path, "b", 1.0)
                await wait_for(lambda: _waiting(own, waiting.run_id), timeout=20)
                heal = _cut(link, how)
                try:
                    await asyncio.sleep(PARTITION)
                finally:
                    heal()
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
    said = [r.getMessage() for r in caplog.records if getattr(r, "run_id", None) == holding.run_id]
    assert any("will be retried in" in m for m in said), said
    assert any("waits for its delivery to come back (at most 30s" in m for m in said), said


def _cut(link: Proxy, how: str) -> Callable[[], None]:
    """Cut the link; the function returned restores it."""
    if how == "disabled":
        link.disable()
        return link.enable
    for stream in ("downstream", "upstream"):
        link.add_toxic(f"blackhole-{stream}", "timeout", stream, timeout=0)

    def heal() -> None:
        for stream in ("downstream", "upstream"):
            link.remove_toxic(f"blackhole-{stream}")

    return heal


async def _waiting(world: NatsWorld, run_id: str) -> bool:
    info = await world.get_run(run_id)
    return info is not None and step_slots.waiting(info)


async def test_a_cut_off_slot_holder_whose_sync_body_runs_on_exits_before_its_lease_can_be_taken(
    nats_server: NatsServer, toxiproxy: Toxiproxy, tmp_path: Path, spawn_worker: Any
) -> None:
    """The same partition, with a sync body (in its thread, which no cancel reaches) in a
    worker process of its own: the process exits (70) before its slot can be taken, and the
    waiting run's body starts only after that; the holder's step is retried elsewhere."""
    path = str(tmp_path / "marks")
    link = toxiproxy.proxy(nats_server.url)
    prefix = "p" + uuid.uuid4().hex[:10]
    env = {"WAYLINE_TEST_PREFIX": prefix, "WAYLINE_VISIBILITY_SECONDS": str(VISIBILITY)}
    direct, own = (
        NatsWorld(nats_server.url, prefix=prefix, visibility_seconds=VISIBILITY) for _ in "12"
    )
    try:
        for w in (direct, own):
            await w.start()
        client = wayline.Client(own)
        doomed = spawn_worker(link.url, **env)
        holding = await client.start(sf.held_sync_one, path, "a", BODY)
        await wait_for(lambda: _started(path, "a"), timeout=20)  # only it could take it
        async with wayline.Worker(direct, [sf.held_sync_one], settings=settings()):
            link.disable()
            try:
                waiting = await client.start(sf.held_sync_one, path, "b", 1.0)
                await wait_for(lambda: _ended(doomed, path), timeout=20)
                exited = time.monotonic()  # no earlier than the exit itself
            finally:
                link.enable()
            results = [await h.result(timeout=90) for h in (holding, waiting)]
    finally:
        for w in (own, direct):
            await w.close()
    assert sf.overlaps(path, died=exited) == [], sf.spans(path, died=exited)
    assert doomed.poll() == 70
    assert [what for _, _, what in sf.spans(path, died=exited)] == [
        "a 1 died",
        "b 1 end",
        "a 2 end",
    ]
    assert results == ["a attempt 2", "b attempt 1"]


async def _ended(proc: Any, path: str) -> bool:
    """The holder's process exited, or its body (which would have run beside the waiting run's
    had the process not exited) ended."""
    return proc.poll() is not None or any(line.startswith("end a ") for line in lines(path))


async def _started(path: str, tag: str) -> bool:
    return any(line.startswith(f"start {tag} ") for line in lines(path))
