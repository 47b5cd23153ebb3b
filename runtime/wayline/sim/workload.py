"""The flows a seed runs, and the clients that drive them.

One order workflow holds most of what the engine does: steps with retries and
compensations, a hook resumed by several racing clients under one delivery id, a step under a
concurrency limit, a timer, a child run; a client may cancel the run at any point. The step
bodies report to the seed's :class:`~.probe.Probe`, and take a while (virtual time), so that
crashes and redeliveries land inside them.
"""

from __future__ import annotations

import asyncio
import random
from typing import Any

from .. import FatalError, Limit, child, create_hook, sleep, step, workflow
from .._core.definitions import WorkflowDefinition
from ..client import Client
from ..errors import HookNotFoundError, WaylineError
from .probe import Probe
from .trace import Trace

SHIP_MAX = 2


class Stage:
    """What the bodies of the running seed report to, and draw their luck from."""

    probe: Probe | None = None
    rng: random.Random = random.Random(0)
    broken: set[str] = set()
    """Tags whose ``sim.fragile`` step fails until a client mends them (``sim/flows.py``)."""


async def work(name: str, fail: float = 0.0) -> None:
    probe = Stage.probe
    assert probe is not None, "a simulated body runs inside a seed"
    async with probe.body(name):
        await asyncio.sleep(Stage.rng.uniform(0.0, 4.0))
        if Stage.rng.random() < fail:
            raise RuntimeError(f"{name} failed (simulated)")


@step(name="sim.refund", max_retries=5, retry_delay="1s")
async def refund(order: str) -> None:
    await work("refund")


@step(name="sim.charge", compensate=refund, max_retries=3, retry_delay="1s")
async def charge(order: str) -> str:
    await work("charge", fail=0.3)
    return f"charge-{order}"


@step(name="sim.restock", max_retries=5, retry_delay="1s")
async def restock(order: str) -> None:
    await work("restock")


@step(
    name="sim.ship",
    compensate=restock,
    max_retries=3,
    retry_delay="2s",
    concurrency=Limit(key=lambda order: "dock", max=SHIP_MAX, lease="20s"),
)
async def ship(order: str) -> str:
    await work("ship", fail=0.1)
    return f"parcel-{order}"


@step(name="sim.send", max_retries=3)
async def send(order: str) -> str:
    await work("send", fail=0.2)
    return f"sent-{order}"


@workflow(name="sim.notify")
async def notify(order: str) -> str:
    return await send(order)


HOOK_TIMEOUT = "5m"
"""How long a simulated hook waits for its resume: longer than anything else a seed does (a
client stops trying to resume after 2-2.5 min, a body lasts seconds, the longest period of a
worker is the 60-75 s between two looks for lost starts), so the timeout still comes only for a
resume that never came. It was an hour, and the seeds whose hook timed out (one in twenty)
spent that hour of virtual time on idle heartbeats, renewals and receives: about a third of a
range's CPU. A seed that ends before the timeout runs as it did with an hour."""


@workflow(name="sim.order")
async def order(name: str) -> str:
    charged = await charge(name)
    approval: dict[str, Any] = await create_hook(f"approve:{name}", timeout=HOOK_TIMEOUT, type=dict)
    if not approval.get("ok"):
        raise FatalError(f"order {name} was not approved")
    parcel = await ship(name)
    await sleep("5s")
    note = await child(notify, name)
    return f"{charged}/{parcel}/{note}"


WORKFLOWS: list[WorkflowDefinition[..., Any]] = [order, notify]
LIMITS = {"ship": SHIP_MAX}


async def drive(client: Client, rng: random.Random, trace: Trace, name: str) -> None:
    """One order from a client's side: start it, resume its hook from racing clients under
    one delivery id, and maybe cancel it."""
    await asyncio.sleep(rng.uniform(0.0, 20.0))
    handle = await client.start(order, name)
    trace.note(f"client started {name} as {handle.run_id[-6:]}")
    ok = rng.random() < 0.8
    racers = [
        _resume(client, rng.uniform(0.0, 15.0), name, ok, trace) for _ in range(rng.randint(1, 3))
    ]
    if rng.random() < 0.25:
        racers.append(_cancel(client, handle.run_id, rng.uniform(0.0, 60.0), trace))
    if rng.random() < 0.25:
        racers.append(
            _pause(client, handle.run_id, rng.uniform(0.0, 40.0), rng.uniform(0, 30), trace)
        )
    await asyncio.gather(*racers)


async def _resume(client: Client, after: float, name: str, ok: bool, trace: Trace) -> None:
    await asyncio.sleep(after)
    for _ in range(60):  # until the run has created its hook, or is past it
        try:
            await client.resume_hook(f"approve:{name}", {"ok": ok}, delivery_id="d1")
            trace.note(f"client resumed approve:{name}")
            return
        except HookNotFoundError:
            await asyncio.sleep(2.0)
        except WaylineError as err:  # the run ended, or the store did not answer
            trace.note(f"client resume of approve:{name} refused: {err.code}")
            return


async def _pause(client: Client, run_id: str, after: float, hold: float, trace: Trace) -> None:
    """Pause the run a while, then unpause it (a run left paused would wait for ever)."""
    await asyncio.sleep(after)
    try:
        paused = await client.pause(run_id, "paused by the simulation")
    except WaylineError as err:  # it ended, or is being compensated or cancelled
        trace.note(f"client pause {run_id[-6:]} refused: {err.code}")
        return
    trace.note(f"client pause {run_id[-6:]}: {paused}")
    await asyncio.sleep(hold)
    try:
        done = await client.unpause(run_id, "unpaused by the simulation")
    except WaylineError as err:  # a cancel ended it meanwhile
        trace.note(f"client unpause {run_id[-6:]} refused: {err.code}")
        return
    trace.note(f"client unpause {run_id[-6:]}: {done}")


async def _cancel(client: Client, run_id: str, after: float, trace: Trace) -> None:
    await asyncio.sleep(after)
    done = await client.cancel(run_id, "cancelled by the simulation")
    trace.note(f"client cancel {run_id[-6:]}: {done}")
