"""The clients of the later features' flows (``sim/flows.py``): runs of a rate-limited step,
starts of one debounce key, a continue_as_new chain, and a run redriven by two racing clients
and forked. What only a client sees (a handle's result) is judged here; the rest is read from
the logs (``sim/feature_checks.py``)."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Coroutine
from types import CoroutineType
from typing import Any

from ..client import Client
from ..errors import WaylineError
from ..start_options import StartOptions
from . import flows
from .probe import Probe
from .trace import Trace
from .workload import Stage

FLOW_ODDS = 0.4
"""How likely a seed runs each flow: all four in every seed cost 60% more CPU than the orders
alone, and seeds a minute count for more than flows a seed."""
RESULT_SECONDS = 4 * 3600.0
"""Virtual seconds a client waits for a result (the seed's horizon is six hours)."""


async def drive(
    client: Client, bare: Client, rng: random.Random, trace: Trace, probe: Probe
) -> None:
    """Some of the later features' flows, at once, each from its own client task: each seed
    draws which (every flow in two seeds of five), so that a seed costs little more CPU than
    the order workload alone. ``bare`` is a client without definitions: the runs it
    starts by name are pinned by the worker that begins them."""
    flows_of_seed: list[Coroutine[Any, Any, None]] = []
    if rng.random() < FLOW_ODDS:
        flows_of_seed += [
            _pace(bare, rng.uniform(0.0, 20.0), f"p{i}", rng.randint(0, 9), trace) for i in range(2)
        ]
    if rng.random() < FLOW_ODDS:
        flows_of_seed.append(_debounce(client, random.Random(rng.getrandbits(64)), trace, probe))
    if rng.random() < FLOW_ODDS:
        chain = _chain(client, rng.uniform(0.0, 20.0), rng.randint(0, 9), trace, probe)
        flows_of_seed.append(chain)
    if rng.random() < FLOW_ODDS:
        flows_of_seed.append(_repair(client, random.Random(rng.getrandbits(64)), trace, probe))
    names = ", ".join(c.cr_code.co_name for c in flows_of_seed if isinstance(c, CoroutineType))
    trace.note(f"feature flows: {names or 'none'}")
    await asyncio.gather(*flows_of_seed)


async def _pace(client: Client, after: float, tag: str, priority: int, trace: Trace) -> None:
    """A run started by name, at a priority and under a fairness key of its own."""
    await asyncio.sleep(after)
    options = StartOptions(priority=priority, fairness_key=f"tenant-{tag}")
    handle = await client.start_with(options, flows.pacer.name, tag)
    trace.note(f"client started pacer {tag} as {handle.run_id[-6:]}")


async def _debounce(client: Client, rng: random.Random, trace: Trace, probe: Probe) -> None:
    """Starts of one key, some within the period of the one before (they collapse into its
    run) and some after it (a new run); every handle's result is its run's last input."""
    period = flows.DEBOUNCE_SECONDS
    last: dict[str, str] = {}
    handles = {}
    returned: tuple[float, str] | None = None
    for i in range(rng.randint(2, 5)):
        await asyncio.sleep(rng.uniform(0.0, 2.0 * period))
        called = asyncio.get_running_loop().time()
        handle = await client.start(flows.reindex, "doc", f"v{i}")
        trace.note(f"client debounced start v{i} as {handle.run_id[-6:]}")
        # A start called well within the period of the previous start's return finds that
        # run not begun: the run begins only a full period after its last start's stamp.
        soon = returned is not None and called - returned[0] < period - 1.0
        if returned is not None and soon and handle.run_id != returned[1]:
            probe.violate(
                f"debounced start v{i} {called - returned[0]:.3f}s after the last made "
                f"a new run {handle.run_id[-6:]}"
            )
        returned = (asyncio.get_running_loop().time(), handle.run_id)
        last[handle.run_id] = f"v{i}"
        handles[handle.run_id] = handle
    for run_id, handle in sorted(handles.items()):
        try:
            got = await handle.result(timeout=RESULT_SECONDS)
        except WaylineError as err:  # crashes used up its step's attempts: a failure is allowed
            trace.note(f"debounced run {run_id[-6:]} ended: {err.code}")
            continue
        if got != last[run_id]:
            probe.violate(f"debounced run {run_id[-6:]} gave {got}, not {last[run_id]}")


async def _chain(client: Client, after: float, priority: int, trace: Trace, probe: Probe) -> None:
    """A chain of runs; each carries the first one's priority and fairness key."""
    await asyncio.sleep(after)
    options = StartOptions(priority=priority, fairness_key="chain")
    handle = await client.start_with(options, flows.chain, 1)
    trace.note(f"client started chain as {handle.run_id[-6:]}")
    try:
        got = await handle.result(timeout=RESULT_SECONDS)
    except WaylineError as err:  # crashes used up a step's attempts: a failure is allowed
        trace.note(f"chain {handle.run_id[-6:]} ended: {err.code}")
        return
    if got != flows.CHAIN_LENGTH:
        probe.violate(f"chain {handle.run_id[-6:]} gave {got}, not {flows.CHAIN_LENGTH}")


async def _repair(client: Client, rng: random.Random, trace: Trace, probe: Probe) -> None:
    """A run whose second step fails until mended; then two clients race to redrive it, and a
    third forks it from that step, before or after the redrive."""
    tag = "r1"
    Stage.broken.add(tag)
    await asyncio.sleep(rng.uniform(0.0, 20.0))
    handle = await client.start(flows.repair, tag)
    trace.note(f"client started repair as {handle.run_id[-6:]}")
    try:
        await handle.result(timeout=RESULT_SECONDS)
    except WaylineError as err:
        trace.note(f"repair {handle.run_id[-6:]} ended: {err.code}")
    Stage.broken.discard(tag)
    await asyncio.gather(
        *(_redrive(client, handle.run_id, rng.uniform(0.0, 2.0), trace) for _ in range(2)),
        _fork(client, handle.run_id, rng.uniform(0.0, 4.0), trace),
    )


async def _redrive(client: Client, run_id: str, after: float, trace: Trace) -> None:
    await asyncio.sleep(after)
    try:
        done = await client.redrive(run_id, "mended by the simulation")
    except WaylineError as err:  # the other client redrove it first, or it did not fail
        trace.note(f"client redrive {run_id[-6:]} refused: {err.code}")
        return
    trace.note(f"client redrove {run_id[-6:]} from {done}")


async def _fork(client: Client, run_id: str, after: float, trace: Trace) -> None:
    await asyncio.sleep(after)
    try:
        fork = await client.fork(run_id, from_step="sim.fragile")
    except WaylineError as err:
        trace.note(f"client fork of {run_id[-6:]} refused: {err.code}")
        return
    trace.note(f"client forked {run_id[-6:]} as {fork.run_id[-6:]}")
