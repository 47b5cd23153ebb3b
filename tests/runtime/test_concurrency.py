"""Concurrency limits on every world: a counted semaphore in the world, per key, across
workers; waiting runs are visibly blocked; a slot is freed by its run's end."""

from __future__ import annotations

from pathlib import Path

import pytest

import wayline
from tests.runtime import sdk_flows
from tests.runtime.flows import lines
from tests.runtime.harness import Engine, of_type, wait_for
from wayline._core.events import EventType
from wayline.errors import ConfigurationError

pytestmark = pytest.mark.partitioned  # docs/nats.md, "Partitions"

Order = sdk_flows.Order


async def test_one_run_per_key_across_two_workers(engine: Engine, tmp_path: Path) -> None:
    path = str(tmp_path / "marks")
    flow, client = sdk_flows.one_per_customer, engine.client
    other = await engine.make_world()  # a second worker process's own connection
    async with engine.worker([flow]), engine.worker([flow], world=other):
        a1 = await client.start(flow, Order("ana", "a1"), path)
        await wait_for(lambda: engine.world.get_hook("hold:a1"))
        a2 = await client.start(flow, Order("ana", "a2"), path)
        b1 = await client.start(flow, Order("bo", "b1"), path)
        await wait_for(lambda: engine.world.get_hook("hold:b1"))  # another key: not held up

        async def blocked() -> bool:
            info = await client.get_run(a2.run_id)
            return info.status is wayline.RunStatus.BLOCKED

        await wait_for(blocked)
        info = await client.get_run(a2.run_id)
        assert info.error is not None and info.error["waitingFor"] == "concurrency"
        assert a1.run_id in info.error["message"]
        assert not of_type(await a2.events(), EventType.RUN_STARTED)
        assert sorted(lines(path)) == ["start a1", "start b1"]

        await client.resume_hook("hold:a1", None)  # a1 ends: its slot is free
        assert await a1.result(timeout=10) == "a1"
        await wait_for(lambda: engine.world.get_hook("hold:a2"), timeout=15)
        assert (await client.get_run(a2.run_id)).status is wayline.RunStatus.RUNNING
        await client.resume_hook("hold:a2", None)
        await client.resume_hook("hold:b1", None)
        assert await a2.result(timeout=10) == "a2"
        assert await b1.result(timeout=10) == "b1"
    assert lines(path) == ["start a1", "start b1", "start a2"]  # each body once, a2 last


async def test_cancelling_the_holder_frees_its_slot(engine: Engine, tmp_path: Path) -> None:
    path = str(tmp_path / "marks")
    flow, client = sdk_flows.one_per_customer, engine.client
    async with engine.worker([flow]):
        first = await client.start(flow, Order("cy", "c1"), path)
        await wait_for(lambda: engine.world.get_hook("hold:c1"))
        waiting = await client.start(flow, Order("cy", "c2"), path)

        async def blocked() -> bool:
            return (await client.get_run(waiting.run_id)).status is wayline.RunStatus.BLOCKED

        await wait_for(blocked)
        await client.cancel(first.run_id)
        with pytest.raises(wayline.RunCancelledError):
            await first.result(timeout=10)
        await wait_for(lambda: engine.world.get_hook("hold:c2"), timeout=15)
        await client.resume_hook("hold:c2", None)
        assert await waiting.result(timeout=10) == "c2"


async def test_the_world_semaphore_counts_live_runs_only(engine: Engine) -> None:
    world = engine.world
    flow = sdk_flows.one_per_customer
    runs = [
        (await engine.client.start(flow, Order("dee", f"d{i}"), "/dev/null")).run_id
        for i in range(3)
    ]  # no worker: they stay pending, which is live
    assert await world.acquire_slot("k", runs[0], 2) == (True, [runs[0]])
    assert await world.acquire_slot("k", runs[0], 2) == (True, [runs[0]])  # idempotent
    assert await world.acquire_slot("k", runs[1], 2) == (True, [runs[0], runs[1]])
    won, holders = await world.acquire_slot("k", runs[2], 2)
    assert not won and holders == [runs[0], runs[1]]
    await engine.client.cancel(runs[0])  # still live until a worker ends it
    assert not (await world.acquire_slot("k", runs[2], 2))[0]
    from wayline._core.events import NewEvent

    await world.append(runs[0], [NewEvent(EventType.RUN_CANCELLED)])  # ended: slot freed
    assert await world.acquire_slot("k", runs[2], 2) == (True, [runs[1], runs[2]])


def test_limits_are_checked() -> None:
    with pytest.raises(ConfigurationError, match="max"):
        wayline.Limit(max=0)
    with pytest.raises(ConfigurationError, match="key"):
        wayline.Limit(key=42)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="Limit"):
        wayline.workflow(concurrency=3)(sdk_flows.one_per_customer.fn)  # type: ignore[arg-type]
    assert wayline.Limit(key="all").key_for("w", [], {}) == "w:all"
