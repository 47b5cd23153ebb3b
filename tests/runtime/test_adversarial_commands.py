"""Operator commands racing a live run on every world: ``wake_up`` of a hook's timeout against
the hook's payload, from two clients, with two workers. One of the two wins in the log, the
run's result is the winner's, the after-step runs once, and the ended run does not change."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

import wayline
from tests.runtime import adversarial_flows as af
from tests.runtime.harness import Engine, wait_for
from wayline._core.events import EventType

RUNS = 8


async def test_wake_up_of_a_hook_timeout_races_its_payload(engine: Engine, tmp_path: Path) -> None:
    marker = str(tmp_path / "m")
    other = wayline.Client(await engine.make_world())
    flow = af.adv_hook_or_timeout
    async with engine.worker([flow]), engine.worker([flow], world=other.world):
        handles = [await engine.client.start(flow, marker, f"t{i}") for i in range(RUNS)]
        for i in range(len(handles)):
            await wait_for(lambda i=i: engine.world.get_hook(f"t{i}"))

        async def wake(h: wayline.RunHandle[str]) -> None:
            try:
                await other.wake_up(h.run_id, "h1.timeout")
            except wayline.WaylineError:
                pass  # the payload won, the run moved on (or ended)

        async def resume(i: int) -> None:
            try:
                await engine.client.resume_hook(f"t{i}", i)
            except wayline.HookNotFoundError:
                pass  # the timeout won

        await asyncio.gather(*(wake(h) for h in handles), *(resume(i) for i in range(RUNS)))
        results = [await h.result(timeout=20) for h in handles]
        before = [await h.events() for h in handles]
        await asyncio.sleep(0.5)
        after = [await h.events() for h in handles]
    assert before == after  # an ended run does not change
    for i, (h, events, result) in enumerate(zip(handles, after, results, strict=True)):
        answers = [
            e
            for e in events
            if (e.type is EventType.HOOK_RECEIVED and e.correlation_id == "h1")
            or (e.type is EventType.WAIT_COMPLETED and e.correlation_id == "h1.timeout")
        ]
        first = answers[0]
        expect = "timed out" if first.type is EventType.WAIT_COMPLETED else f"got {i}"
        assert result == expect, (h.run_id, [e.type for e in answers])
    lines = af.lines(marker)
    assert sorted(lines) == sorted(f"t{i} {r}" for i, r in enumerate(results))


async def test_resume_and_abandon_of_a_stuck_unwind_race_from_two_clients(
    engine: Engine, tmp_path: Path
) -> None:
    """Two people (two operator replicas, a CLI) answer the same parked unwind at once, with
    two workers live: one answer wins; the reversal runs again only if a resume won, once."""
    from tests.runtime import flows

    log = str(tmp_path / "log")
    (tmp_path / flows.STUCK_FLAG).touch()
    other = wayline.Client(await engine.make_world())
    n = 6
    async with (
        engine.worker([flows.saga_stuck]),
        engine.worker([flows.saga_stuck], world=other.world),
    ):
        handles = [await engine.client.start(flows.saga_stuck, log, f"o{i}") for i in range(n)]
        for h in handles:

            async def stuck(h: wayline.RunHandle[str] = h) -> bool:
                return await h.status() is wayline.RunStatus.COMPENSATION_STUCK

            await wait_for(stuck, timeout=20)
        (tmp_path / flows.STUCK_FLAG).unlink()

        async def answer(call: object) -> str:
            try:
                await call  # type: ignore[misc]
            except wayline.WaylineError:
                return "refused"
            return "done"

        won: list[list[str]] = []
        for h in handles:
            won.append(
                await asyncio.gather(
                    answer(engine.client.resume_compensation(h.run_id)),
                    answer(other.abandon_compensation(h.run_id)),
                    answer(other.resume_compensation(h.run_id)),
                )
            )
        errors = []
        for h in handles:
            try:
                await h.result(timeout=20)
            except wayline.RunFailedError as err:
                errors.append(str(err))
    lines = flows.lines(log)
    for i, (_h, answers, error) in enumerate(zip(handles, won, errors, strict=True)):
        tries = lines.count(f"try release o{i}")
        assert answers.count("done") == 1, (answers, error, tries)
        if answers[1] == "done":
            assert "abandoned" in error and tries == 1, (answers, error, tries)
        else:
            assert "abandoned" not in error and tries == 2, (answers, error, tries)


async def test_a_payload_after_wake_up_of_a_hook_timeout_is_refused_before_a_worker_replays(
    engine: Engine, tmp_path: Path
) -> None:
    """``wake_up(run, "h1.timeout")`` records the timeout; a payload sent after it, before a
    worker has replayed the timeout, must be refused as one sent after a timeout the worker
    wrote is (4084ce0: "a late payload is refused"), not accepted and then dropped."""
    flow = af.adv_hook_or_timeout
    async with engine.worker([flow]):
        handle = await engine.client.start(flow, str(tmp_path / "marks"), "late-1")
        await wait_for(lambda: engine.world.get_hook("late-1"))
    # no worker: nothing replays the timeout yet
    assert await engine.client.wake_up(handle.run_id, "h1.timeout") == ["h1.timeout"]
    with pytest.raises(wayline.HookNotFoundError):
        await engine.client.resume_hook("late-1", "too late")


async def test_an_old_log_with_a_hook_timeout_and_no_disposal_replays(
    engine: Engine, tmp_path: Path
) -> None:
    """A log written before 4084ce0 (or by an older ``wake_up``): the timeout alone. The
    replay disposes the hook once, after it, and the run goes on."""
    from wayline._core.events import NewEvent

    flow = af.adv_hook_or_timeout
    async with engine.worker([flow]):
        handle = await engine.client.start(flow, str(tmp_path / "marks"), "old-1")
        await wait_for(lambda: engine.world.get_hook("old-1"))
    at = {"resumeAt": 0.0, "early": True}
    await engine.world.append(handle.run_id, [NewEvent(EventType.WAIT_COMPLETED, "h1.timeout", at)])
    async with engine.worker([flow]):
        await engine.world.enqueue("flow", {"runId": handle.run_id, "reason": "test"})
        assert await handle.result(timeout=20) == "timed out"
    kinds = [(e.type, e.correlation_id) for e in await handle.events()]
    assert kinds.count((EventType.HOOK_DISPOSED, "h1")) == 1, kinds
