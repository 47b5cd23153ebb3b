"""Rate limits (``wayline.RateLimit``) on every world: a step over its rate waits without
spending an attempt and runs once a token is due, the bucket is shared by every worker on the
world, and the wait shows in ``runs show`` and the operator's status with when it ends."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

import wayline
from tests.runtime import rate_limit_flows as rf
from tests.runtime.harness import Engine, of_type, settings, wait_for
from wayline._core.events import Event, EventType
from wayline.cli.timeline import render_show
from wayline_operator.status import run_status

pytestmark = pytest.mark.partitioned  # docs/nats.md, "Partitions"


def _attempts(events: list[Event]) -> list[int]:
    return [e.data["attempt"] for e in of_type(events, EventType.STEP_STARTED)]


async def test_steps_over_the_rate_wait_without_spending_attempts_across_two_workers(
    engine: Engine, tmp_path: Path
) -> None:
    """Six runs, each one step under "4/s" with a burst of 1, on two workers of one world:
    every body runs once, on its first attempt, and the six starts span at least the 1.25 s
    the bucket allows (half of it is asserted: a body's mark comes a little after its token)."""
    path = str(tmp_path / "marks")
    other = await engine.make_world()
    tight = settings(max_queue_deliveries=1)  # a counted hand-back would fail a flow
    async with (
        engine.worker([rf.paced_once], settings=tight),
        engine.worker([rf.paced_once], world=other, settings=tight),
    ):
        handles = [await engine.client.start(rf.paced_once, path, f"p{i}") for i in range(6)]
        results = [await h.result(timeout=60) for h in handles]
    assert results == [f"p{i}" for i in range(6)]
    starts = rf.starts(path)
    assert sorted(tag for tag, _ in starts) == sorted(results)  # each ran once
    times = sorted(at for _, at in starts)
    assert times[-1] - times[0] >= 0.5 * 5 / 4
    waited = 0
    for h in handles:
        events = await h.events()
        assert _attempts(events) == [1]  # waiting spent no attempt
        blocks = of_type(events, EventType.RUN_BLOCKED)
        for b in blocks:
            assert b.data["waitingFor"] == "rate_limit"
            assert b.data["limit"] == "step:rate_limit_flows.paced:*"
            assert b.data["step"] == "rate_limit_flows.paced" and b.data["stepId"] == "s1"
            assert b.data["until"]
        waited += bool(blocks)
    assert waited >= 1  # six starts, one token at a time: someone waited, visibly


async def test_a_waiting_step_shows_its_key_and_when_the_token_is_due(
    engine: Engine, tmp_path: Path
) -> None:
    """The bucket of user "ana" is emptied first: her step waits (``blocked``, ``waitingFor:
    rate_limit`` with ``until``) in ``runs show`` and the operator's status, starts no attempt
    meanwhile, and runs once its token is due; another user is not held up."""
    path = str(tmp_path / "marks")
    key = "step:rate_limit_flows.per_user:ana"
    assert await engine.world.take_token(key, rf.SLOW.per_second, rf.SLOW.capacity) == 0.0
    async with engine.worker([rf.notify]):
        ana = await engine.client.start(rf.notify, path, "ana")
        bob = await engine.client.start(rf.notify, path, "bob")
        assert await bob.result(timeout=30) == "bob"

        async def blocked() -> bool:
            return await ana.status() is wayline.RunStatus.BLOCKED

        await wait_for(blocked)
        info = await engine.client.get_run(ana.run_id)
        assert info.error is not None
        assert info.error["waitingFor"] == "rate_limit" and info.error["limit"] == key
        out = io.StringIO()
        render_show(info, await ana.events(), out, "test", None)
        shown = out.getvalue()
        assert f"is waiting for rate limit {key!r} (6/m): its token is due at" in shown
        assert info.error["until"] in shown
        wait, *rest = run_status(info, await ana.events(), now=engine.world.now())["waitingFor"]
        assert [w["kind"] for w in rest] == ["step"]  # the step itself, not started yet
        assert wait["kind"] == "rate_limit" and wait["limit"] == key
        assert wait["until"] == info.error["until"] and wait["stepId"] == "s1"
        assert not of_type(await ana.events(), EventType.STEP_STARTED)  # nothing spent
        assert await ana.result(timeout=60) == "ana"
    events = await ana.events()
    assert _attempts(events) == [1]
    assert of_type(events, EventType.RUN_UNBLOCKED)  # lifted by the step that got its token
    assert [tag for tag, _ in rf.starts(path)].count("ana") == 1


async def test_a_run_over_its_workflows_rate_waits_before_it_starts(engine: Engine) -> None:
    key = "rate_limit_flows.limited_run:all"
    assert await engine.world.take_token(key, rf.RUNS.per_second, rf.RUNS.capacity) == 0.0
    async with engine.worker([rf.limited_run]):
        handle = await engine.client.start(rf.limited_run, "late")

        async def blocked() -> bool:
            return await handle.status() is wayline.RunStatus.BLOCKED

        await wait_for(blocked)
        info = await engine.client.get_run(handle.run_id)
        assert info.error is not None and info.error["waitingFor"] == "rate_limit"
        assert info.error["limit"] == key and info.error["until"]
        assert "waiting for rate limit" in info.error["message"]
        assert not of_type(await handle.events(), EventType.RUN_STARTED)
        assert await handle.result(timeout=30) == "late"


async def test_a_key_function_that_raises_fails_the_step_unstarted(
    engine: Engine, tmp_path: Path
) -> None:
    path = str(tmp_path / "marks")
    async with engine.worker([rf.notify_unkeyed]):
        handle = await engine.client.start(rf.notify_unkeyed, path, "ana")
        with pytest.raises(wayline.RunFailedError):
            await handle.result(timeout=30)
    events = await handle.events()
    [failed] = of_type(events, EventType.STEP_FAILED)
    assert failed.data["error"]["code"] == "RATE_LIMIT_KEY"
    assert "LookupError: no bucket for ana" in failed.data["error"]["message"]
    assert not of_type(events, EventType.STEP_STARTED) and rf.starts(path) == []
