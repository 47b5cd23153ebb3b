"""A race settles when its winner does (issue 16, item 6), on every world: the run moves on and
ends while the losers' inline bodies still run, and the delivery is settled only after they
did (seed 000, first invariant)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from tests.runtime import fencing_flows as ff
from tests.runtime.flows import lines
from tests.runtime.harness import Engine, of_type, wait_for
from tests.runtime.test_fencing import bodies
from wayline._core.events import EventType


async def test_a_race_settles_when_its_winner_does(
    engine: Engine, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = str(tmp_path / "m")
    async with engine.worker([ff.race_of_sleeps]):
        handle = await engine.client.start(ff.race_of_sleeps, path)
        assert await handle.result(timeout=30) == 100
        at_result = [line.split()[:2] for line in lines(path)]
        held = await engine.world.runs_with_messages()
    # when the run had ended, the losers were still running (started, not ended) ...
    assert ["end", "d100"] in at_result and ["end", "after"] in at_result
    assert ["start", "d3000"] in at_result and ["start", "d6000"] in at_result
    assert ["end", "d3000"] not in at_result and ["end", "d6000"] not in at_result
    # ... and its delivery was still held for them; settled once they were done
    if held is not None:
        assert handle.run_id in held

        async def settled() -> bool:  # once the world read the ack (NATS sends it one way)
            return handle.run_id not in (await engine.world.runs_with_messages() or set())

        await wait_for(settled, timeout=5)
    runs = bodies(path)
    assert {k: [how for _, _, how in v] for k, v in runs.items()} == {
        "d3000": ["end"],
        "d100": ["end"],
        "d6000": ["end"],
        "after": ["end"],
    }
    events = await handle.events()
    [won] = [e for e in of_type(events, EventType.STEP_COMPLETED) if e.correlation_id == "s2"]
    [after] = [e for e in of_type(events, EventType.STEP_CREATED) if e.correlation_id == "s4"]
    [end] = of_type(events, EventType.RUN_COMPLETED)
    assert won.seq < after.seq < end.seq
    assert {e.correlation_id for e in of_type(events, EventType.STEP_COMPLETED)} == {"s2", "s4"}
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
