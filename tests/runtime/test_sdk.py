"""The SDK surface on every world: workflow metadata, ``wayline.any`` and retry policies."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import pytest

import wayline
from tests.runtime import flows, sdk_flows
from tests.runtime.flows import lines
from tests.runtime.harness import Engine, of_type
from wayline._core.events import EventType
from wayline._engine.step_runner import idempotency_key

pytestmark = pytest.mark.partitioned  # docs/nats.md, "Partitions"


async def test_workflow_info_and_step_started_at(engine: Engine) -> None:
    async with engine.worker([sdk_flows.info_flow]):
        handle = await engine.client.start(sdk_flows.info_flow)
        out = await handle.result(timeout=10)
    events = await handle.events()
    started = of_type(events, EventType.RUN_STARTED)[0]
    assert out["runId"] == handle.run_id
    assert (out["name"], out["revision"]) == ("sdk-info", 3)
    assert out["identity"] == sdk_flows.info_flow.identity
    assert out["startedAt"] == pytest.approx(started.created_at, abs=1e-5)  # the log's stamp
    assert out["sameStart"] is True
    assert out["attempt"] == 1
    step_start = of_type(events, EventType.STEP_STARTED)[0]
    stamped = datetime.fromisoformat(out["step"]["startedAt"]).timestamp()
    assert abs(stamped - step_start.created_at) < 5  # the worker's clock near the world's


def test_workflow_info_outside_a_workflow_is_a_named_error() -> None:
    with pytest.raises(wayline.NotInWorkflowError, match="workflow_info"):
        wayline.workflow_info()
    with pytest.raises(wayline.NotInWorkflowError, match="any"):
        wayline.any()


async def test_any_returns_the_first_success(engine: Engine, tmp_path: Path) -> None:
    path = str(tmp_path / "any")
    async with engine.worker([sdk_flows.any_flow]):
        handle = await engine.client.start(sdk_flows.any_flow, path, [True, False, True])
        assert await handle.result(timeout=10) == "p1"


async def test_any_raises_every_error_when_all_fail(engine: Engine, tmp_path: Path) -> None:
    path = str(tmp_path / "any")
    async with engine.worker([sdk_flows.any_flow]):
        handle = await engine.client.start(sdk_flows.any_flow, path, [True, True, True])
        out = await handle.result(timeout=10)
    assert len(out["allFailed"]) == 3
    for i, message in enumerate(out["allFailed"]):
        assert f"p{i} broke" in message  # in argument order
    assert sorted(lines(path)) == ["p0", "p1", "p2"]  # each body ran once


async def test_a_retry_policy_backs_off_from_the_log(engine: Engine, tmp_path: Path) -> None:
    path = str(tmp_path / "backoff")
    async with engine.worker([sdk_flows.backoff_flow]):
        handle = await engine.client.start(sdk_flows.backoff_flow, path, 3)
        assert await handle.result(timeout=15) == 4
    assert len(lines(path)) == 4
    retrying = of_type(await handle.events(), EventType.STEP_RETRYING)
    key = idempotency_key(handle.run_id, "backoff_step", 0)
    policy = sdk_flows.FAST_BACKOFF
    assert [e.data["attempt"] for e in retrying] == [1, 2, 3]
    for e in retrying:
        # the schedule is a function of what the log holds (key, attempt): the same anywhere
        assert e.data["delay"] == pytest.approx(policy.delay(e.data["attempt"], key))
        assert e.data["source"] == "policy"
        assert e.data["retryAfter"] == pytest.approx(e.created_at + e.data["delay"], abs=1.0)
    base = [0.05, 0.1, 0.15]  # capped by max_interval
    for e, b in zip(retrying, base, strict=True):
        assert b * 0.9 <= e.data["delay"] <= b * 1.1


async def test_a_retry_policy_is_bounded(engine: Engine, tmp_path: Path) -> None:
    path = str(tmp_path / "backoff")
    async with engine.worker([sdk_flows.backoff_flow]):
        handle = await engine.client.start(sdk_flows.backoff_flow, path, 99)
        with pytest.raises(wayline.RunFailedError, match="attempt 4 of 4, retries exhausted"):
            await handle.result(timeout=15)
    assert len(lines(path)) == 4


async def test_non_retryable_errors_fail_at_once(engine: Engine, tmp_path: Path) -> None:
    path = str(tmp_path / "picky")
    async with engine.worker([sdk_flows.picky_flow]):
        handle = await engine.client.start(sdk_flows.picky_flow, path, "value")
        with pytest.raises(wayline.RunFailedError, match="non-retryable"):
            await handle.result(timeout=15)
    assert len(lines(path)) == 1
    assert not of_type(await handle.events(), EventType.STEP_RETRYING)


async def test_retry_after_wins_for_one_attempt(engine: Engine, tmp_path: Path) -> None:
    path = str(tmp_path / "picky")
    async with engine.worker([sdk_flows.picky_flow]):
        handle = await engine.client.start(sdk_flows.picky_flow, path, "retry_after")
        assert await handle.result(timeout=15) == "retry_after"
    (retry,) = of_type(await handle.events(), EventType.STEP_RETRYING)
    assert (retry.data["delay"], retry.data["source"]) == (0.01, "retry_after")


@wayline.step(max_retries=3, retry_delay=0.05)
async def sdk_sleeps_in_a_step(path: str) -> int:
    flows.mark(path, "try")
    await wayline.sleep("1s")  # a workflow-only call: a mistake no retry mends
    return 1


@wayline.workflow
async def sdk_misplaced_sleep(path: str) -> int:
    return await sdk_sleeps_in_a_step(path)


async def test_a_workflow_only_call_in_a_step_fails_it_at_once(
    engine: Engine, tmp_path: Path
) -> None:
    """``wayline.sleep`` (or ``workflow_info``, ``create_hook``...) in a step body is a
    programming error: the step fails at its first attempt with NOT_IN_WORKFLOW named, as a
    SerializationError does, instead of being retried as a passing fault (4 attempts before)."""
    path = str(tmp_path / "tries")
    async with engine.worker([sdk_misplaced_sleep]):
        handle = await engine.client.start(sdk_misplaced_sleep, path)
        with pytest.raises(wayline.RunFailedError, match="NotInWorkflowError"):
            await handle.result(timeout=20)
    assert flows.lines(path) == ["try"]


async def test_gather_raises_the_first_failure_in_log_order(engine: Engine, tmp_path: Path) -> None:
    """Branches that settled before ``gather`` was called count in log order, as ``race`` and
    ``any`` count them, not in argument order."""
    path = str(tmp_path / "gather")
    async with engine.worker([sdk_flows.gather_settled_flow]):
        handle = await engine.client.start(sdk_flows.gather_settled_flow, path)
        out = await handle.result(timeout=20)
    events = await handle.events()
    failed = of_type(events, EventType.STEP_FAILED)
    assert len(failed) == 2 and "fast broke" in str(failed[0].data), failed  # the log's order
    woke = of_type(events, EventType.WAIT_COMPLETED)[0]
    assert all(f.seq < woke.seq for f in failed), events  # both settled before gather
    assert "fast broke" in out, out
    assert sorted(lines(path)) == ["fast", "slow"]
