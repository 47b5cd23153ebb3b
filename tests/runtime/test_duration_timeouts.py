"""Every duration a user gives takes the same forms (seconds, a ``timedelta``, ``"50ms"``), a
client's waits and the testing environment's included; a bad one is refused before any wait."""

from __future__ import annotations

from datetime import timedelta

import pytest

import wayline
import wayline.testing
from tests.runtime import sdk_flows
from tests.runtime.harness import Engine

pytestmark = pytest.mark.engine_logic  # docs/testing.md, "The pyramid"


async def test_result_times_out_after_a_duration_string(engine: Engine) -> None:
    async with engine.worker([sdk_flows.napping_flow]):
        handle = await engine.client.start(sdk_flows.napping_flow)
        with pytest.raises(wayline.ResultTimeoutError, match=r"after 0\.05s"):
            await handle.result(timeout="50ms")


async def test_result_takes_a_timedelta(engine: Engine) -> None:
    async with engine.worker([sdk_flows.prompt_flow]):
        handle = await engine.client.start(sdk_flows.prompt_flow, 41)
        assert await handle.result(timeout=timedelta(seconds=5)) == 42


@pytest.mark.parametrize("bad", ["soon", "-1s", -1, timedelta(seconds=-1)])
async def test_a_bad_result_timeout_is_refused_before_any_wait(engine: Engine, bad: object) -> None:
    # no worker: the run stays pending, so only the refusal can end these calls at once
    handle = await engine.client.start(sdk_flows.prompt_flow, 1)
    with pytest.raises(ValueError, match="duration"):
        await handle.result(timeout=bad)  # type: ignore[arg-type]


async def test_the_testing_environment_takes_durations() -> None:
    with pytest.raises(ValueError, match="not a duration"):
        wayline.testing.Environment([sdk_flows.prompt_flow], check_interval="often")
    env = wayline.testing.Environment(
        [sdk_flows.prompt_flow], check_interval=timedelta(milliseconds=5)
    )
    async with env:
        handle = await env.client.start(sdk_flows.prompt_flow, 1)
        assert await handle.result(timeout="10s") == 2
