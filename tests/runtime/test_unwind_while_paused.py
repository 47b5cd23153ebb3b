"""A run paused while its worker fails it in the run's own code starts no compensation body
until it is unpaused, on every world. The simulator found it (seed 416 of ``make sim``): a
client resumed a hook with a refusal, another paused the run, and the worker, which had read
the log before the pause, failed the run and began its unwind while paused (its
``run_compensating``, then the refund's ``step_started``)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

import pytest

import wayline
from tests.runtime.flows import lines, mark
from tests.runtime.harness import Engine, of_type, wait_for
from wayline._core.events import Event, EventType, NewEvent, RunStatus
from wayline.world import World


@wayline.step(name="unwind_paused.refund")
def refund(path: str, order: str) -> None:
    mark(path, f"refund {order}")


@wayline.step(name="unwind_paused.reserve", compensate=refund)
def reserve(path: str, order: str) -> str:
    mark(path, f"reserve {order}")
    return f"r_{order}"


@wayline.step(name="unwind_paused.charge", max_retries=0)
def charge(path: str, order: str) -> str:
    mark(path, f"charge {order}")
    raise wayline.FatalError("card declined")


@wayline.workflow(name="unwind_paused.refused")
async def refused(path: str, order: str) -> str:
    """Fails when its approval hook is resumed with a refusal, as the seed's order did."""
    await reserve(path, order)
    approval = await wayline.create_hook(f"unwind-paused-{order}")
    if approval != "yes":
        raise wayline.FatalError(f"order {order} refused")
    return "shipped"


@wayline.workflow(name="unwind_paused.gave_up")
async def gave_up(path: str, order: str) -> str:
    """Catches its charge's error, waits for a person's word, then fails by itself."""
    await reserve(path, order)
    try:
        await charge(path, order)
    except wayline.StepFailedError:
        mark(path, "caught")
    await wayline.create_hook(f"unwind-paused-{order}")
    raise wayline.FatalError(f"order {order} given up")


class _PausedBeforeUnwind:
    """The worker's world, unchanged but for one thing: before the worker's first
    ``run_compensating`` reaches the world, ``pause`` runs (a client's pause), as a pause from
    another client would land between the worker's read of the log and its unwind."""

    def __init__(self, world: World, pause: Any) -> None:
        self._world, self._pause, self.fired = world, pause, False
        self.answered = asyncio.Event()  # the world took or refused that append

    def __getattr__(self, name: str) -> Any:
        return getattr(self._world, name)

    async def append(
        self, run_id: str, events: Sequence[NewEvent], *, expected_seq: int | None = None
    ) -> list[Event]:
        if not self.fired and any(e.type is EventType.RUN_COMPENSATING for e in events):
            self.fired = True
            await self._pause(run_id)
            try:
                return await self._world.append(run_id, events, expected_seq=expected_seq)
            finally:
                self.answered.set()
        return await self._world.append(run_id, events, expected_seq=expected_seq)


@pytest.mark.parametrize("flow", [refused, gave_up], ids=["hook-refusal", "caught-error"])
async def test_a_run_failing_by_itself_while_paused_compensates_after_the_unpause(
    engine: Engine, tmp_path: Path, flow: Any
) -> None:
    path, order = str(tmp_path / "marks"), f"o-{flow.name.rsplit('.', 1)[1]}"
    paused: list[str] = []

    async def pause(run_id: str) -> None:
        assert await engine.client.pause(run_id, "a person looks first") is True
        paused.append(run_id)

    world = _PausedBeforeUnwind(await engine.make_world(), pause)
    async with engine.worker([flow], world=cast(World, world)):
        handle = await engine.client.start(flow, path, order)

        async def waiting() -> bool:
            return bool(of_type(await handle.events(), EventType.HOOK_CREATED))

        await wait_for(waiting, timeout=20)
        await engine.client.resume_hook(f"unwind-paused-{order}", "no")

        await asyncio.wait_for(world.answered.wait(), timeout=20)
        # The worker decided its unwind before it read the pause: the world has refused it,
        # and the worker waits for the unpause.
        events = await handle.events()
        assert not of_type(events, EventType.RUN_COMPENSATING)
        assert f"refund {order}" not in lines(path), "the refund ran while the run was paused"
        assert (await engine.client.get_run(handle.run_id)).status is RunStatus.PAUSED
        assert await handle.unpause("go on") is True

        async def ended() -> bool:
            return (await engine.client.get_run(handle.run_id)).status.terminal

        await wait_for(ended, timeout=30)
    assert paused == [handle.run_id]
    assert (await engine.client.get_run(handle.run_id)).status is RunStatus.FAILED
    assert lines(path).count(f"refund {order}") == 1
    events = await handle.events()
    [unpaused] = of_type(events, EventType.RUN_UNPAUSED)
    [begun] = of_type(events, EventType.RUN_COMPENSATING)
    refund_starts = [
        e for e in of_type(events, EventType.STEP_STARTED) if e.correlation_id.endswith(".c0")
    ]
    assert refund_starts and unpaused.seq < begun.seq < refund_starts[0].seq
