"""Adversarial races of gather, hooks and cancels, in one process on both worlds:
``gather``/``any`` with a failing branch, a cancel or a worker's death mid-gather; a hook taking
several payloads from racing resumers; a cancel recorded between the read a decision (or a queued
start) is made on and its write: nothing new may start after it."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

import wayline
from tests.runtime import adversarial_flows as af
from tests.runtime import race3_flows as r3
from tests.runtime.harness import Engine, of_type, settings, wait_for
from wayline._core.events import Event, EventType


def _seen(path: str) -> list[str]:
    return [line.rpartition(" ")[0] for line in af.lines(path)]


def _started(path: str, name: str, n: int = 1):  # type: ignore[no-untyped-def]
    async def check() -> bool:
        return len(af.spans(path, name)) >= n

    return check


def _refunded_once_after(path: str, charge: str, refund: str) -> None:
    """``refund`` ran once, after every run of ``charge`` ended, and no charge overlapped."""
    seen = _seen(path)
    assert not af.overlapping(path, charge), seen
    assert seen.count(f"{refund}-start") == 1, seen
    at = seen.index(f"{refund}-start")
    before = seen[:at]
    assert before.count(f"{charge}-start") == before.count(f"{charge}-end") >= 1, seen
    assert f"{charge}-start" not in seen[at:], seen


@pytest.mark.parametrize("name", ["r3_gather_fail", "r3_any_then_fail"])
async def test_a_failing_branch_refunds_the_charge_once_after_it_ends(
    engine: Engine, tmp_path: Path, name: str
) -> None:
    """``gather`` with a branch failing while the other charges; ``any`` whose slow loser
    charges while the workflow fails: the charge runs once, its refund once, after it."""
    workflow = getattr(r3, name)
    marker = str(tmp_path / "m")
    async with engine.worker([workflow]):
        handle = await engine.client.start(workflow, marker, 1.0)
        with pytest.raises(wayline.RunFailedError):
            await handle.result(timeout=20)
    _refunded_once_after(marker, "charge_a", "refund_a")
    assert len(af.spans(marker, "charge_a")) == 1, _seen(marker)


async def test_gather_branch_fails_while_a_queued_branch_charges(
    engine: Engine, tmp_path: Path
) -> None:
    marker = str(tmp_path / "m")
    second = await engine.make_world()
    async with (
        engine.worker([r3.r3_gather_queued_fail]),
        engine.worker([r3.r3_gather_queued_fail], world=second),
    ):
        handle = await engine.client.start(r3.r3_gather_queued_fail, marker, 1.5)
        with pytest.raises(wayline.RunFailedError):
            await handle.result(timeout=25)
    _refunded_once_after(marker, "charge_q", "refund_q")
    assert len(af.spans(marker, "charge_q")) == 1, _seen(marker)


async def test_cancel_mid_gather_refunds_each_branch_once_after_it(
    engine: Engine, tmp_path: Path
) -> None:
    marker = str(tmp_path / "m")
    async with engine.worker([r3.r3_gather_two]):
        handle = await engine.client.start(r3.r3_gather_two, marker, 1.0)
        await wait_for(_started(marker, "charge_a"))
        await wait_for(_started(marker, "charge_b"))
        assert await engine.client.cancel(handle.run_id)
        with pytest.raises(wayline.RunCancelledError):
            await handle.result(timeout=20)
    _refunded_once_after(marker, "charge_a", "refund_a")
    _refunded_once_after(marker, "charge_b", "refund_b")


async def test_worker_force_closed_mid_gather_then_cancel(engine: Engine, tmp_path: Path) -> None:
    """Both branches run (one async, one a thread) when their worker is force-closed; the run
    is cancelled and a replacement unwinds: each refund once, after its own charge ended."""
    marker = str(tmp_path / "m")
    first = wayline.Worker(
        engine.world, [r3.r3_gather_two], settings=settings(), shutdown_grace_seconds=0.2
    )
    await first.start()
    handle = await engine.client.start(r3.r3_gather_two, marker, 1.5)
    await wait_for(_started(marker, "charge_a"))
    await wait_for(_started(marker, "charge_b"))
    closing = asyncio.ensure_future(first.close(graceful=False))
    async with engine.worker([r3.r3_gather_two], world=await engine.make_world()):
        await asyncio.sleep(0.3)
        assert await engine.client.cancel(handle.run_id)
        with pytest.raises(wayline.RunCancelledError):
            await handle.result(timeout=25)
        await asyncio.wait_for(closing, 20)
    _refunded_once_after(marker, "charge_a", "refund_a")
    _refunded_once_after(marker, "charge_b", "refund_b")


async def test_racing_resumers_each_payload_once_in_log_order(
    engine: Engine, tmp_path: Path
) -> None:
    """Six payloads from three clients at once, each sent twice under its delivery id, to an
    ``async for`` over one hook served by two workers: each taken once, in log order."""
    marker = str(tmp_path / "m")
    token = f"r3-pay:{marker}"
    n = 6
    second = await engine.make_world()
    clients = [wayline.Client(await engine.make_world()) for _ in range(3)]
    async with engine.worker([r3.r3_payloads]), engine.worker([r3.r3_payloads], world=second):
        handle = await engine.client.start(r3.r3_payloads, marker, token, n)
        await wait_for(lambda: engine.world.get_hook(token), timeout=20)

        async def send(i: int) -> None:
            c = clients[i % len(clients)]
            await c.resume_hook(token, i, delivery_id=f"d{i}")
            await c.resume_hook(token, i, delivery_id=f"d{i}")  # a retry: nothing twice

        await asyncio.gather(*(send(i) for i in range(n)))
        got = await handle.result(timeout=25)
    assert sorted(got) == list(range(n)), got
    events = await engine.world.list_events(handle.run_id)
    received = [e.data["payload"] for e in of_type(events, EventType.HOOK_RECEIVED)]
    assert received == got, (received, got)
    assert af.lines(marker) == [f"got {v}" for v in got]


async def _resumed_then_cancelled(
    engine: Engine, flow: Any, marker: str, token: str
) -> tuple[list[Event], str]:
    """Start ``flow`` on ``marker`` and ``token``, resume its hook, and see the run end
    cancelled; its events and a line each of them, to show when an assertion fails."""
    async with engine.worker([flow]):
        handle = await engine.client.start(flow, marker, token)
        await wait_for(lambda: engine.world.get_hook(token), timeout=20)
        await engine.client.resume_hook(token, 1)
        with pytest.raises(wayline.RunCancelledError):
            await handle.result(timeout=20)
    events = await engine.world.list_events(handle.run_id)
    return events, "\n".join(f"{e.seq} {e.type} {e.correlation_id}" for e in events)


async def test_a_cancel_written_before_the_next_decision_starts_nothing_new(
    engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The worker read the log (the hook's payload) and decided the next step; a cancel
    reaches the log before that decision is written. The decision was made on a log without
    the cancel: it must not be written (nothing new starts once the cancel is recorded)."""
    from wayline._engine import handler as handler_module

    marker = str(tmp_path / "m")
    token = f"r3-cancel-batch:{marker}"
    real = handler_module.append_batch
    injected: list[bool] = []

    async def cancel_first(world, replay, batch, **kw):  # type: ignore[no-untyped-def]
        names = [e.data.get("stepName") for e in batch if e.type is EventType.STEP_CREATED]
        if "r3_charge_c" in names and not injected:
            injected.append(await engine.client.cancel(replay.run_id))
        return await real(world, replay, batch, **kw)

    monkeypatch.setattr(handler_module, "append_batch", cancel_first)
    _, log = await _resumed_then_cancelled(engine, r3.r3_hook_then_charge, marker, token)
    assert injected == [True]
    assert "charge_c-start" not in _seen(marker), log
    _refunded_once_after(marker, "charge_a", "refund_a")


async def test_a_cancel_recorded_before_a_queued_step_starts_keeps_it_from_starting(
    engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A queued (``timeout=``) step's message is delivered; a cancel is recorded before its
    start is (the unwind has not begun yet). Its start, fenced on the log, must see the
    request: the unwind skips a step that never started, so none may start now."""
    from wayline._engine import step_delivery

    marker = str(tmp_path / "m")
    token = f"r3-queued:{marker}"
    real = step_delivery._start
    injected: list[bool] = []

    async def cancel_first(world, run_id, *rest):  # type: ignore[no-untyped-def]
        if not injected:
            injected.append(await engine.client.cancel(run_id))
        return await real(world, run_id, *rest)

    monkeypatch.setattr(step_delivery, "_start", cancel_first)
    events, log = await _resumed_then_cancelled(engine, r3.r3_hook_then_queued, marker, token)
    assert injected == [True]
    assert "charge_q-start" not in _seen(marker), log
    assert not of_type(events, EventType.STEP_STARTED), log


async def test_a_step_started_elsewhere_before_a_cancel_does_not_start_again_here(
    engine: Engine,
) -> None:
    """A delivery read the step unstarted; another delivery of it starts it, then a cancel is
    recorded; this delivery's start is refused and folds both. The step is running elsewhere,
    but this delivery read it unstarted: it must not start it (again) after the cancel. (The
    fold moved the step it had read to ``running``, and a second start went in.)"""
    from wayline._core.events import NewEvent
    from wayline._core.ids import new_run_id
    from wayline._core.projections import fold
    from wayline._engine import step_delivery

    world, run_id = engine.world, new_run_id()
    created = {"workflow": "w", "input": {"args": []}}
    await world.append(run_id, [NewEvent(EventType.RUN_CREATED, None, created)], expected_seq=0)
    await world.append(run_id, [NewEvent(EventType.RUN_STARTED, None, {})])
    step_data = {"stepName": "x", "input": {"args": []}, "occurrence": 0}
    await world.append(run_id, [NewEvent(EventType.STEP_CREATED, "s1", step_data)])
    _, events = await world.read_run(run_id)
    view = fold(run_id, events)
    await world.append(run_id, [NewEvent(EventType.STEP_STARTED, "s1", {"attempt": 1})])
    await world.append(run_id, [NewEvent(EventType.RUN_CANCEL_REQUESTED, None, {"reason": "x"})])
    started = await step_delivery._start(world, run_id, view.steps["s1"], 1, events[-1].seq, view)
    assert started is False
    after = await world.list_events(run_id)
    assert len(of_type(after, EventType.STEP_STARTED)) == 1
