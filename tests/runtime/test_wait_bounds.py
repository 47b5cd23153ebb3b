"""Waits whose end is not a time: ``inf`` (also spelt ``"inf"`` or ``"1e400"``) and anything past
the year 9999 are refused where the workflow asks for them, as a negative duration is. They
used to be recorded (``resumeAt: Infinity``, not JSON) and broke every reader that prints
the time: ``wayline runs show`` raised, a WorkflowRun's status could not be written."""

from __future__ import annotations

import math
import time
from typing import Any

import pytest

from tests.runtime import sdk_flows
from tests.runtime.harness import Engine, of_type, wait_for
from wayline._core.events import EventType
from wayline.cli.timeline import fmt_clock, fmt_time

pytestmark = pytest.mark.engine_logic  # docs/testing.md, "The pyramid"


@pytest.mark.parametrize(
    ("kind", "duration"),
    [("sleep", "inf"), ("sleep", "1e400"), ("sleep", 1e12), ("hook", "inf"), ("child", 1e12)],
)
async def test_a_wait_that_would_end_after_the_year_9999_is_refused(
    engine: Engine, kind: str, duration: Any
) -> None:
    async with engine.worker([sdk_flows.waits_of, sdk_flows.sleeps_an_hour]):
        handle = await engine.client.start(sdk_flows.waits_of, kind, duration)
        out = await handle.result(timeout=10)
    assert out.startswith("refused: ") and "after the year 9999" in out
    assert not of_type(await handle.events(), EventType.WAIT_CREATED, EventType.CHILD_CREATED)


async def test_a_wait_of_thousands_of_years_is_still_a_wait(engine: Engine) -> None:
    async with engine.worker([sdk_flows.waits_of]):
        handle = await engine.client.start(sdk_flows.waits_of, "sleep", "100000w")

        async def armed() -> bool:
            return bool(of_type(await handle.events(), EventType.WAIT_CREATED))

        await wait_for(armed)
        assert await engine.client.wake_up(handle.run_id) == ["w1"]
        assert await handle.result(timeout=10) == "waited"


def test_a_time_no_datetime_holds_is_printed_not_raised() -> None:
    far = time.time() + 1e12
    assert fmt_time(far) == "after the year 9999"
    assert fmt_clock(math.inf) == "never"
