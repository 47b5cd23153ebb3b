"""A ``RunHandle`` commands its run as the client does (cancel, terminate, wake, resume), on
every world: the handle a caller already holds is enough."""

from __future__ import annotations

from pathlib import Path

import pytest

import wayline
from tests.runtime import client_flows, saga_flows
from tests.runtime.harness import Engine, wait_for

pytestmark = pytest.mark.engine_logic  # docs/testing.md, "The pyramid"


async def test_a_handle_wakes_its_run(engine: Engine) -> None:
    async with engine.worker([client_flows.naps]):
        handle = await engine.client.start(client_flows.naps, 5)  # a five-hour sleep
        woken = await wait_for(handle.wake)  # [] until the worker has recorded the sleep
        assert woken == ["w1"]
        assert await handle.result(timeout=10) == "awake"
        with pytest.raises(wayline.RunTerminalError):
            await handle.wake()


async def test_a_handle_cancels_and_terminates_its_run(engine: Engine) -> None:
    async with engine.worker([client_flows.hook_rounds]):
        cancelled = await engine.client.start(client_flows.hook_rounds, "c", 1)
        await engine.client.wait_for_hook("c", timeout=10)
        assert await cancelled.cancel("no longer needed") is True
        with pytest.raises(wayline.RunCancelledError, match="no longer needed"):
            await cancelled.result(timeout=10)
        assert await cancelled.cancel() is False  # it has ended

        ended = await engine.client.start(client_flows.hook_rounds, "t", 1)
        assert await ended.terminate("stop") is True
        assert await ended.status() is wayline.RunStatus.CANCELLED
        assert await ended.terminate() is False


async def test_a_handle_resumes_only_a_stuck_compensation(engine: Engine) -> None:
    handle = await engine.client.start(client_flows.hook_rounds, "r", 1)
    with pytest.raises(wayline.WaylineError, match="not compensation_stuck; nothing to resume"):
        await handle.resume()


async def test_a_handle_resume_answers_as_the_clients_does(engine: Engine, tmp_path: Path) -> None:
    """``RunHandle.resume()`` answered None where ``Client.resume_compensation`` (and every
    other command of the handle) answers whether it recorded something."""
    offline = tmp_path / saga_flows.SEAT_DESK_OFFLINE
    offline.touch()
    async with engine.worker([saga_flows.trip]):
        handle = await engine.client.start(saga_flows.trip, str(tmp_path / "log"), "t1")

        async def stuck() -> bool:
            return await handle.status() is wayline.RunStatus.COMPENSATION_STUCK

        await wait_for(stuck, timeout=20)
        offline.unlink()  # the seat desk is back: the resumed unwind goes through
        assert await handle.resume() is True
        with pytest.raises(wayline.RunFailedError, match="raised FatalError: no hotel"):
            await handle.result(timeout=20)
