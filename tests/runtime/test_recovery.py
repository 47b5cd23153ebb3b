"""Recovery re-arms the non-terminal runs that have no wake coming (seed 004), on every
world."""

from __future__ import annotations

import wayline
from tests.runtime import flows
from tests.runtime.harness import Engine, wait_for
from wayline._core.events import EventType, NewEvent
from wayline._core.ids import new_run_id


async def test_recovery_rearms_only_runs_without_a_wake(engine: Engine) -> None:
    """A sleeping run has its wake stored (delayed): recovery leaves it alone. A run whose
    messages were all lost (here: never sent) gets a new wake and completes."""
    async with engine.worker([flows.sleeper, flows.chain], recover=False):
        sleeping = await engine.client.start(flows.sleeper, 3600.0)
        await wait_for(lambda: _status_is(engine, sleeping.run_id, "running"))
        await wait_for(lambda: engine.world.runs_with_messages())
    lost = new_run_id()
    await engine.world.append(
        lost,
        [NewEvent(EventType.RUN_CREATED, data={"workflow": "chain", "input": {"args": [3]}})],
    )
    worker = wayline.Worker(engine.world, [flows.sleeper, flows.chain])
    counts = await worker.recover_runs()
    assert (counts["total"], counts["rearmed"]) == (2, 1)
    assert await engine.world.runs_with_messages() == {sleeping.run_id, lost}
    async with engine.worker([flows.sleeper, flows.chain], recover=False):
        assert await engine.client.handle(lost).result(timeout=10) == 3
    assert (await sleeping.status()) is wayline.RunStatus.RUNNING


async def _status_is(engine: Engine, run_id: str, status: str) -> bool:
    info = await engine.world.get_run(run_id)
    return info is not None and str(info.status) == status


async def test_a_run_waiting_on_a_person_is_left_alone_until_input_arrives(
    engine: Engine,
) -> None:
    """A hook without a timeout brings its own wake (resume_hook enqueues one): recovery
    leaves the run alone. A payload recorded whose wake was lost is work: re-armed."""
    async with engine.worker([flows.kid_waits], recover=False):
        handle = await engine.client.start(flows.kid_waits, "rec-tok")
        await wait_for(lambda: engine.world.get_hook("rec-tok"))
    worker = wayline.Worker(engine.world, [flows.kid_waits])

    async def settled() -> bool:  # once the world read the start's ack (NATS: one way)
        return await engine.world.runs_with_messages() == set()

    await wait_for(settled, timeout=5)
    counts = await worker.recover_runs()
    assert (counts["waiting"], counts["rearmed"]) == (1, 0)
    hook = await engine.world.get_hook("rec-tok")
    assert hook is not None
    await engine.world.append(  # resume_hook's write, without its enqueue
        hook.run_id, [NewEvent(EventType.HOOK_RECEIVED, hook.correlation_id, {"payload": 7})]
    )
    counts = await worker.recover_runs()
    assert counts["rearmed"] == 1
    async with engine.worker([flows.kid_waits], recover=False):
        assert await handle.result(timeout=10) == 7
