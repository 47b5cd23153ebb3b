"""Network faults between workers and nats-server, and between a cluster's nodes, applied
through a real toxiproxy-server while a workload of runs is in its steps.

``single_node`` puts each of two workers behind its own proxy to one nats-server (the client
that starts and reads the runs connects directly) and poisons both links with one toxic, on
both directions, for the fault's length. ``partition`` cuts node ``n0`` of a three-node
cluster (routes through proxies, see ``cluster.py``) from its peers while a worker connected
to ``n0`` alone keeps talking to it, and another worker is connected to ``n2``.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import wayline
from tests.chaos import workload as wl
from tests.chaos.cluster import RoutedCluster
from tests.runtime.harness import settings, wait_for
from tests.toxiproxy import Proxy, Toxiproxy
from wayline.worlds.nats import NatsWorld

TOXICS: dict[str, tuple[str, dict[str, Any]]] = {
    # 300 ms each way with 200 ms of jitter: a request and its reply cross the link twice
    "latency": ("latency", {"latency": 300, "jitter": 200}),
    # 2 KB/s each way: a few step messages a second, below what the workload sends
    "bandwidth": ("bandwidth", {"rate": 2}),
    # every connection is reset as soon as it carries data, reconnects included
    "reset": ("reset_peer", {"timeout": 0}),
    # no byte crosses and no connection is closed: the link looks up and is dead
    "blackhole": ("timeout", {"timeout": 0}),
}
KINDS = [*TOXICS, "partition"]


@dataclass(frozen=True)
class Shape:
    """How big a workload and how long a fault."""

    runs: int = 12
    steps: int = 6
    step_seconds: float = 0.5
    fault_seconds: float = 5.0
    bound: float = 40.0
    """Seconds after the fault's end within which every run must have ended."""
    visibility: float = 10.0


def _poison(proxies: list[Proxy], kind: str) -> Callable[[], None]:
    toxic, attributes = TOXICS[kind]
    for proxy in proxies:
        for stream in ("upstream", "downstream"):
            proxy.add_toxic(f"{kind}-{stream}", toxic, stream, **attributes)

    def heal() -> None:
        for proxy in proxies:
            for stream in ("upstream", "downstream"):
                proxy.remove_toxic(f"{kind}-{stream}")

    return heal


def _world(servers: str | list[str], prefix: str, shape: Shape, replicas: int = 1) -> NatsWorld:
    return NatsWorld(
        servers,
        prefix=prefix,
        replicas=replicas,
        visibility_seconds=shape.visibility,
        connect_attempts=5,
        reconnect_time_wait=0.2,
    )


async def _workload(
    client: wayline.Client,
    workers: list[NatsWorld],
    shape: Shape,
    fault: str,
    cut: Callable[[], Awaitable[Callable[[], None]]],
) -> wl.Figures:
    """Start the runs, cut once half of them have finished a step body, hold the fault for
    its length, heal, and read back."""
    figures = wl.Figures(fault)
    labels = [f"{fault}-{uuid.uuid4().hex[:8]}-{n}" for n in range(shape.runs)]
    flows: list[Any] = [wl.chaos_run]
    async with contextlib.AsyncExitStack() as running:
        for world in workers:
            await running.enter_async_context(wayline.Worker(world, flows, settings=settings()))
        handles = {
            label: await client.start(wl.chaos_run, label, shape.steps, shape.step_seconds)
            for label in labels
        }

        async def half_in() -> bool:
            done = sum(1 for label in labels for e in wl.EXECUTIONS[label, 0] if e.ended)
            return done >= shape.runs // 2

        await wait_for(half_in, timeout=60, interval=0.05)
        heal = await cut()
        try:
            await asyncio.sleep(shape.fault_seconds)
        finally:
            heal()
        healed = time.time()
        await wl.read_back(client, handles, shape.steps, healed, shape.bound, figures)
    return figures


async def single_node(kind: str, server_url: str, toxiproxy: Toxiproxy, shape: Shape) -> wl.Figures:
    """One toxic on both workers' links to one nats-server."""
    prefix = "c" + uuid.uuid4().hex[:10]
    proxies = [toxiproxy.proxy(server_url) for _ in range(2)]
    own = _world(server_url, prefix, shape)
    workers = [_world(p.url, prefix, shape) for p in proxies]
    try:
        for w in (own, *workers):
            await w.start()

        async def cut() -> Callable[[], None]:
            return _poison(proxies, kind)

        return await _workload(wayline.Client(own), workers, shape, kind, cut)
    finally:
        for w in (own, *workers):
            await w.close()


async def partition(cluster: RoutedCluster, shape: Shape) -> wl.Figures:
    """Node n0 cut from n1 and n2 while one worker talks to n0 alone and one to n2; the
    client talks to n1. Streams are replicated on all three nodes."""
    prefix = "c" + uuid.uuid4().hex[:10]
    own = _world(cluster.url("n1"), prefix, shape, replicas=3)
    workers = [_world(cluster.url(n), prefix, shape, replicas=3) for n in ("n0", "n2")]

    async def cut() -> Callable[[], None]:
        proxies = cluster.isolate("n0")
        # The cut must be real: n0 has lost every route (a route that bypassed the proxies
        # would make this scenario measure nothing).
        deadline = time.monotonic() + 10
        while peers := await asyncio.to_thread(cluster.peers, "n0"):
            if time.monotonic() > deadline:
                raise AssertionError(f"n0 still routes to {peers} after the cut")
            await asyncio.sleep(0.05)

        def heal() -> None:
            for proxy in proxies:
                proxy.enable()

        return heal

    try:
        for w in (own, *workers):
            await w.start()
        return await _workload(wayline.Client(own), workers, shape, "partition", cut)
    finally:
        for w in (own, *workers):
            await w.close()
