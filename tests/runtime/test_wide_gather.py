"""A wide ``gather`` of queued steps (both worlds): every step's start is one fenced append on
the run's log, and all of them arrive at once. They took turns only by refusing each other:
each refusal read and folded the whole log again, and a start refused 20 times was handed
back to be redelivered later (a gather of 120 trivial steps took about 28 s on SQLite). Now
the starts of one run in one process take turns, and a refused one reads only what was
appended since."""

from __future__ import annotations

import logging

import pytest

import wayline
from tests.runtime.harness import Engine

WIDE = 60


@wayline.step(max_retries=0)
async def wide_square(x: int) -> int:
    return x * x


@wayline.workflow
async def wide_gather(n: int) -> int:
    return sum(await wayline.gather(*[wide_square(i) for i in range(n)]))


async def test_a_wide_gather_of_queued_steps_starts_each_without_a_busy_log(
    engine: Engine, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="wayline")
    reads = 0
    real = engine.world.read_run

    async def counted(run_id: str) -> object:
        nonlocal reads
        reads += 1
        return await real(run_id)

    engine.world.read_run = counted  # type: ignore[method-assign]
    async with engine.worker([wide_gather]):
        run = await engine.client.start(wide_gather, WIDE)
        assert await run.result(timeout=120) == sum(i * i for i in range(WIDE))
    busy = [r.getMessage() for r in caplog.records if "the log moved" in r.getMessage()]
    assert busy == []
    # one read per delivery (a step's, and the flow's after it), none per refused start
    assert reads <= 3 * WIDE + 10, reads
    events = await engine.world.list_events(run.run_id)
    starts = [e for e in events if e.type == "step_started"]
    assert len(starts) == WIDE and all(e.data.get("attempt") == 1 for e in starts)
