"""Time-skipping tests (``wayline.testing``) and ``Client.wake_up`` on every world."""

from __future__ import annotations

from pathlib import Path

import pytest

import wayline
import wayline.testing
from tests.runtime import sdk_flows
from tests.runtime.flows import lines
from tests.runtime.harness import Engine, of_type, wait_for
from wayline._core import clock
from wayline._core.events import EventType
from wayline.errors import RunTerminalError

DAY = 86400.0


async def test_a_month_long_sleep_is_tested_at_once(tmp_path: Path) -> None:
    path = str(tmp_path / "marks")
    async with wayline.testing.Environment([sdk_flows.month_long]) as env:
        handle = await env.client.start(sdk_flows.month_long, path)
        out = await handle.result(timeout=20)
        assert env.skipped >= 30 * DAY - 60  # less the real time the test took
        (wait,) = of_type(await handle.events(), EventType.WAIT_COMPLETED)
        assert "early" not in wait.data  # the clock really reached the wake time
    assert clock.offset() == 0.0  # the environment put the clock back
    assert out["slept"] >= 30 * DAY
    assert out["stepGap"] >= 30 * DAY  # the step bodies saw the same clock
    assert lines(path) == ["before", "after"]  # each body ran once


async def test_retry_backoff_is_skipped_too(tmp_path: Path) -> None:
    path = str(tmp_path / "marks")
    async with wayline.testing.Environment([sdk_flows.recovers_after_a_day]) as env:
        handle = await env.client.start(sdk_flows.recovers_after_a_day, path)
        assert await handle.result(timeout=20) == 3
        assert env.skipped >= 25 * 3600 - 60  # 1h, then 24h (less the real time taken)
    assert len(lines(path)) == 3


async def test_a_paused_clock_does_not_skip() -> None:
    async with wayline.testing.Environment([sdk_flows.sleeps_an_hour]) as env:
        with env.paused():
            handle = await env.client.start(sdk_flows.sleeps_an_hour)

            async def armed() -> bool:
                return bool(of_type(await handle.events(), EventType.WAIT_CREATED))

            await wait_for(armed)
            for _ in range(20):  # many skipper checks while paused
                await __import__("asyncio").sleep(0.01)
            assert env.skipped == 0.0
            assert not (await handle.status()).terminal
        assert await handle.result(timeout=20) == "awake"
        assert env.skipped >= 3600 - 60


async def test_wake_up_fires_a_pending_sleep_early(engine: Engine) -> None:
    async with engine.worker([sdk_flows.sleeps_an_hour]):
        handle = await engine.client.start(sdk_flows.sleeps_an_hour)

        async def armed() -> bool:
            return bool(of_type(await handle.events(), EventType.WAIT_CREATED))

        await wait_for(armed)
        with pytest.raises(wayline.WaylineError, match="no pending wait 'w9'"):
            await engine.client.wake_up(handle.run_id, wait="w9")
        assert await engine.client.wake_up(handle.run_id) == ["w1"]
        assert await handle.result(timeout=10) == "awake"
        with pytest.raises(RunTerminalError, match="is completed; there is nothing to wake"):
            await engine.client.wake_up(handle.run_id)  # as an append to an ended run
    events = await handle.events()
    (created,) = of_type(events, EventType.WAIT_CREATED)
    (woken,) = of_type(events, EventType.WAIT_COMPLETED)
    assert woken.data["early"] is True
    assert woken.data["resumeAt"] == created.data["resumeAt"]
    assert woken.created_at < created.data["resumeAt"]  # stamped with the real time


async def test_wake_up_can_time_a_hook_out(engine: Engine) -> None:
    async with engine.worker([sdk_flows.approval_times_out]):
        handle = await engine.client.start(sdk_flows.approval_times_out, "wk")

        async def armed() -> bool:
            hook = await engine.world.get_hook("late:wk")
            return hook is not None and hook.correlation_id == "h2"

        # the first wait times out by itself (0.2s); wake the second one's timeout by name
        await wait_for(armed)
        assert await engine.client.wake_up(handle.run_id) == []  # no plain sleeps
        assert await engine.client.wake_up(handle.run_id, wait="h2.timeout") == ["h2.timeout"]
        with pytest.raises(wayline.RunFailedError, match="HOOK_TIMEOUT"):
            await handle.result(timeout=10)


async def test_a_retry_is_logged_with_its_own_delay_after_the_clock_skipped(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The second retry (24 h) is decided after a 1 h skip; its log line said 25 h, the
    delay counted from the real clock instead of the skipped one."""
    caplog.set_level("INFO", logger="wayline")
    async with wayline.testing.Environment([sdk_flows.recovers_after_a_day]) as env:
        handle = await env.client.start(sdk_flows.recovers_after_a_day, str(tmp_path / "m"))
        assert await handle.result(timeout=20) == 3
    said = [r.getMessage() for r in caplog.records if "will be retried in" in r.getMessage()]
    delays = [float(m.split("will be retried in ")[1].split("s")[0]) for m in said]
    assert len(delays) == 2 and delays[1] <= 24 * 3600, said
