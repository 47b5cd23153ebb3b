"""A process's reads of a run never go back to an older state, and see its own appends, when a
replica of the event log that has not caught up answers its direct gets (ADR-31: any replica
may). Three real nats-servers, their routes through toxiproxy: one follower is cut from its
peers while the run moves on, and a reader that saw the run's newer state through another node
is moved onto the cut one (its connection through a proxy is cut, so it reconnects there). The
chaos partition test met this as a run read as ended and then as running again."""

from __future__ import annotations

import asyncio
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import wayline
from tests.chaos.cluster import RoutedCluster
from tests.nats_fixtures import require_nats
from tests.runtime.harness import wait_for
from tests.toxiproxy import Toxiproxy
from wayline._core.events import EventType, NewEvent, RunStatus
from wayline.errors import RunTerminalError, WorldUnavailableError
from wayline.worlds.nats import NatsWorld

pytestmark = pytest.mark.slow

FILLER_RUNS = 200
"""Appends the follower holds before it is cut (the messages it then misses are under 10%)."""
ROUTE_MS = 1000
"""Latency of the follower's routes once it is back: its catch-up takes round trips of them."""


@pytest.fixture
def cut_cluster(toxiproxy: Toxiproxy) -> Iterator[RoutedCluster]:
    with tempfile.TemporaryDirectory(prefix="wayline-monotonic-") as tmp:
        cluster = RoutedCluster(require_nats(), Path(tmp), toxiproxy)
        try:
            cluster.start()
            yield cluster
        finally:
            cluster.stop()


async def _leader(urls: list[str], stream: str) -> str:
    import nats

    nc = await nats.connect(urls, connect_timeout=2)
    try:
        info = await nc.jetstream().stream_info(stream)
        return str(info.cluster.leader)
    finally:
        await nc.close()


def _world(servers: list[str], prefix: str, **options: Any) -> NatsWorld:
    return NatsWorld(
        servers,
        prefix=prefix,
        replicas=3,
        connect_attempts=5,
        reconnect_time_wait=0.2,
        request_timeout=6.0,  # a request through the slowed routes takes two of their delays
        **options,
    )


async def _status(world: NatsWorld, run_id: str) -> RunStatus | None:
    """The run's status as ``world`` reads it; None while it cannot answer (the cut node
    reaches no leader: no answer is allowed, an older one is not)."""
    try:
        info = await world.get_run(run_id)
    except wayline.WorldUnavailableError:
        return None
    assert info is not None, f"{run_id} read as missing after it was read"
    return info.status


async def test_a_lagging_replica_never_turns_a_read_back(
    cut_cluster: RoutedCluster, toxiproxy: Toxiproxy
) -> None:
    prefix = f"mono{uuid.uuid4().hex[:8]}"
    first = _world(cut_cluster.urls, prefix)
    await first.start()  # provisions the streams on all three nodes
    await first.close()
    leader = await _leader(cut_cluster.urls, first.names.events_stream)
    stale = next(n for n in cut_cluster.names if n != leader)
    front = toxiproxy.proxy(cut_cluster.url(leader).removeprefix("nats://"))
    writer = _world([cut_cluster.url(leader)], prefix)
    probe = _world([cut_cluster.url(stale)], prefix)
    reader = _world(
        [front.url, cut_cluster.url(stale)], prefix, connect_options={"dont_randomize": True}
    )
    for world in (writer, probe, reader):
        await world.start()
    try:
        ended, going = f"mono-ended-{uuid.uuid4().hex[:6]}", f"mono-going-{uuid.uuid4().hex[:6]}"
        for run_id in (ended, going):
            created = NewEvent(EventType.RUN_CREATED, data={"workflow": "mono", "input": None})
            await writer.append(run_id, [created])
        # A follower that comes back enables its direct gets once it has applied 90% of the
        # log it knows of (nats-server's monitorStream), so the few messages it misses here
        # are still missing when it answers again: filler makes them under 10%.
        for i in range(FILLER_RUNS):
            data = {"workflow": "mono-filler", "input": i}
            await writer.append(f"{ended}-f{i}", [NewEvent(EventType.RUN_CREATED, data=data)])
        # the follower to be cut holds both runs as created before it is cut
        await wait_for(lambda: _both_there(probe, ended, going), timeout=15)
        cut = cut_cluster.isolate(stale)
        await writer.append(ended, [NewEvent(EventType.RUN_STARTED)])
        await writer.append(ended, [NewEvent(EventType.RUN_COMPLETED, data={"output": 7})])
        await writer.append(going, [NewEvent(EventType.RUN_STARTED)])
        assert await _status(reader, ended) is RunStatus.COMPLETED
        assert await _status(reader, going) is RunStatus.RUNNING

        front.disable()  # the reader reconnects to the cut follower, which lags
        stale_port = cut_cluster.url(stale).rsplit(":", 1)[1]

        async def on_stale() -> bool:
            nc = reader._nc
            url = nc.connected_url if nc is not None and nc.is_connected else None
            return url is not None and str(url.port) == stale_port

        await wait_for(on_stale, timeout=15)
        for run_id, newest in ((ended, RunStatus.COMPLETED), (going, RunStatus.RUNNING)):
            status = await _status(reader, run_id)
            assert status in (None, newest), f"{run_id} read as {status} after {newest}"

        for proxy in cut:
            for direction in ("upstream", "downstream"):
                proxy.add_toxic(f"slow-{direction}", "latency", direction, latency=ROUTE_MS)
            proxy.enable()
        # while the follower catches up, every read is the newest state or none
        deadline = time.monotonic() + 30
        answered = set()
        while len(answered) < 2 and time.monotonic() < deadline:
            for run_id, newest in ((ended, RunStatus.COMPLETED), (going, RunStatus.RUNNING)):
                status = await _status(reader, run_id)
                assert status in (None, newest), f"{run_id} read as {status} after {newest}"
                if status is not None:
                    answered.add(run_id)
        assert answered == {ended, going}
        # read-your-writes through the follower: an acknowledged append is read back. While
        # the follower's routes are slow an append may be refused as unavailable (not
        # acknowledged: asked again); a refusal as ended means an earlier try was stored.
        deadline = time.monotonic() + 30
        while True:
            try:
                await reader.append(going, [NewEvent(EventType.RUN_COMPLETED, data={"output": 8})])
                break
            except RunTerminalError:
                break
            except WorldUnavailableError:
                assert time.monotonic() < deadline, "no append through the follower in 30 s"
                await asyncio.sleep(0.5)
        assert await _status(reader, going) is RunStatus.COMPLETED
    finally:
        for world in (writer, probe, reader):
            await world.close()


async def _both_there(probe: NatsWorld, *runs: str) -> bool:
    try:
        return all([await probe.get_run(r) is not None for r in runs])
    except wayline.WorldUnavailableError:
        return False
