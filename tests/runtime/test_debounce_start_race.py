"""A debounced start that lands between a worker's read of the run and its ``run_started``:
the run waits out a full quiet period after that start, on every world. The simulator found
it (seed 117 of ``make sim``): the worker read the run past its period, a start collapsed
into it while the worker's append was slow, and the run began 1.3 s after that start."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

import wayline
from tests.runtime import debounce_flows as df
from tests.runtime.harness import Engine, of_type
from wayline._core.events import Event, EventType, NewEvent
from wayline.world import World


class _StartsBeforeBegin:
    """The worker's world, unchanged but for one thing: before the worker's first
    ``run_started`` reaches the world, ``collapse`` runs (a client's start of the same key),
    as a start from another client would in that gap."""

    def __init__(self, world: World, collapse: Any) -> None:
        self._world, self._collapse, self.fired = world, collapse, False

    def __getattr__(self, name: str) -> Any:
        return getattr(self._world, name)

    async def append(
        self, run_id: str, events: Sequence[NewEvent], *, expected_seq: int | None = None
    ) -> list[Event]:
        if not self.fired and any(e.type is EventType.RUN_STARTED for e in events):
            self.fired = True
            await self._collapse()
        return await self._world.append(run_id, events, expected_seq=expected_seq)


async def test_a_start_collapsing_while_the_run_begins_gets_its_full_quiet_period(
    engine: Engine, tmp_path: Path
) -> None:
    path = str(tmp_path / "marks")
    handle = await engine.client.start(df.reindex_in_a_step, path, "doc-race", 1)
    collapsed: list[str] = []

    async def collapse() -> None:
        again = await engine.client.start(df.reindex_in_a_step, path, "doc-race", 2)
        collapsed.append(again.run_id)

    world = _StartsBeforeBegin(await engine.make_world(), collapse)
    async with engine.worker([df.reindex_in_a_step], world=cast(World, world)):
        assert await handle.result(timeout=30) == "doc-race@2"
    assert collapsed == [handle.run_id]  # the second start found the run not begun
    events = await handle.events()
    [started] = of_type(events, EventType.RUN_STARTED)
    [debounced] = of_type(events, EventType.RUN_DEBOUNCED)
    assert debounced.seq < started.seq
    quiet = started.created_at - debounced.created_at
    assert quiet >= 0.5 - 0.05, f"the run began {quiet:.3f}s after its last start (period 0.5s)"
    assert wayline.RunStatus.COMPLETED is (await engine.client.get_run(handle.run_id)).status
