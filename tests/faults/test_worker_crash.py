"""SIGKILL a worker process in the middle of an inline step; another process finishes the run.

The redelivered owning message performs owned recovery (its start is re-stamped with the same
message id), a hook wake arriving during recovery defers to it, and every body is counted."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

import wayline
from tests.runtime import flows
from tests.runtime.harness import of_type, wait_for
from wayline._core.events import EventType

ROOT = Path(__file__).resolve().parents[2]


async def _until_lines(path: str, n: int, timeout: float = 20) -> None:
    async def enough() -> bool:
        return len(flows.lines(path)) >= n

    await wait_for(enough, timeout=timeout)


async def test_sigkill_mid_inline_step_then_owned_recovery(
    tmp_path: Path, spawn_worker, crash_world
) -> None:  # type: ignore[no-untyped-def]
    db = crash_world.arg
    counts = str(tmp_path / "counts")
    async with crash_world.open() as world:
        client = wayline.Client(world)
        first = spawn_worker(db, **crash_world.env)
        handle = await client.start(flows.crashy, counts, 1.5)
        await _until_lines(counts, 2)  # "before", then "attempt 1" of the blocking step
        os.kill(first.pid, signal.SIGKILL)
        first.wait(timeout=10)
        spawn_worker(db, **crash_world.env)
        assert await handle.result(timeout=30) == ["before", "finished", "after"]
        events = await handle.events()
    assert flows.lines(counts) == ["before", "attempt 1", "attempt 2", "after"]
    s2 = [e for e in events if e.correlation_id == "s2"]
    starts = of_type(s2, EventType.STEP_STARTED)
    assert len(starts) == 2
    # owned recovery: the redelivered owning message re-stamps with its own (stable) id
    assert starts[0].data["ownerMessageId"] == starts[1].data["ownerMessageId"]
    assert starts[1].data["attempt"] == 2
    assert len(of_type(s2, EventType.STEP_COMPLETED)) == 1


def _steady(env: dict[str, str]) -> dict[str, str]:
    """``env`` with a 6 s visibility where it sets one (NATS), not 2 s: a live worker renews
    its deliveries every third of the visibility, waits a quarter of that for each answer and
    cuts its bodies off after one and a half periods without one. At 2 s that left 0.17 s a
    renewal and 1 s in all, which the recovering worker missed at load 10-24 in every attempt:
    it cut its own body off four times (RunFailedError: INVOCATION_FENCED, attempt 4 of 4),
    a failure of the machine, not of the recovery this test is about. At 6 s it has 0.5 s a
    renewal and 3 s in all; the killed worker's delivery comes back 6 s after the kill, well
    inside the 30 s bound on the result."""
    return (
        {**env, "WAYLINE_VISIBILITY_SECONDS": "6"} if "WAYLINE_VISIBILITY_SECONDS" in env else env
    )


async def test_hook_wake_during_owned_recovery_defers_to_it(
    tmp_path: Path, spawn_worker, crash_world
) -> None:  # type: ignore[no-untyped-def]
    db = crash_world.arg
    marker = str(tmp_path / "marker")
    env = _steady(crash_world.env)
    async with crash_world.open() as world:
        client = wayline.Client(world)
        first = spawn_worker(db, **env)
        handle = await client.start(flows.hook_during_step, marker, 2.0)
        await _until_lines(marker, 1)
        os.kill(first.pid, signal.SIGKILL)
        first.wait(timeout=10)
        spawn_worker(db, **env)
        await _until_lines(marker, 2)  # owned recovery has started the body again
        await asyncio.sleep(0.3)
        await client.resume_hook(f"mid-step:{marker}", "wake")
        assert await handle.result(timeout=30) == ["done", "wake"]
        await asyncio.sleep(0.5)
    # one killed attempt, one recovery; the wake armed a backstop instead of a third run
    assert flows.lines(marker) == ["attempt 1", "attempt 2"]


async def test_sigkill_during_queued_step_is_redelivered(
    tmp_path: Path, spawn_worker, crash_world
) -> None:  # type: ignore[no-untyped-def]
    """An eager (queued) step's worker dies: the step message comes back to another process."""
    db = crash_world.arg
    log = str(tmp_path / "flaky")
    async with crash_world.open() as world:
        client = wayline.Client(world)
        first = spawn_worker(db, **crash_world.env)
        handle = await client.start(flows.retrying, log, 1)  # fails once: then queue-owned
        await _until_lines(log, 1)
        await asyncio.sleep(0.02)
        os.kill(first.pid, signal.SIGKILL)
        first.wait(timeout=10)
        spawn_worker(db, **crash_world.env)
        assert await handle.result(timeout=30) >= 2
    attempts = [line.split(":")[0] for line in flows.lines(log)]
    assert attempts[0] == "1" and len(attempts) <= 3


LEASE = 6.0
SHORT_LEASE = {
    "WORKFLOW_INLINE_OWNERSHIP_LEASE_SECONDS": str(LEASE),
    # the bound plus the visibility stays below the lease; both leave the 1 s body room on
    # a loaded machine. A 0.4 s visibility fenced the recovering worker itself, renewals
    # being late, and the run was left with no worker; a 1 s one fenced the first worker
    # (its fence trips after half a second without a renewal) before its body of attempt 1
    # had written its line, at load 8-21: the lines read attempt 2 and attempt 3, and the
    # kill this test is about met a redelivery instead. At 2 s the fence waits a second.
    "WAYLINE_MAX_INVOCATION_SECONDS": "2.5",
    "WAYLINE_VISIBILITY_SECONDS": "2.0",
}


async def test_unstable_ids_recover_a_crashed_inline_step_by_the_backstop(  # type: ignore[no-untyped-def]
    tmp_path: Path, spawn_worker, crash_world
) -> None:
    """Degraded mode: the owner check never matches, so recovery is the backstop lease."""
    db = crash_world.arg
    counts = str(tmp_path / "counts")
    async with crash_world.open() as world:
        client = wayline.Client(world)
        first = spawn_worker(
            db, **{**crash_world.env, **SHORT_LEASE}, WAYLINE_TEST_UNSTABLE_IDS="1"
        )
        handle = await client.start(flows.crashy, counts, 1.0)
        await _until_lines(counts, 2)
        os.kill(first.pid, signal.SIGKILL)
        first.wait(timeout=10)
        spawn_worker(db, **{**crash_world.env, **SHORT_LEASE}, WAYLINE_TEST_UNSTABLE_IDS="1")
        assert await handle.result(timeout=30) == ["before", "finished", "after"]
        events = await handle.events()
    assert flows.lines(counts) == ["before", "attempt 1", "attempt 2", "after"]
    starts = of_type([e for e in events if e.correlation_id == "s2"], EventType.STEP_STARTED)
    # recovered through the queue after the lease: a bare (queue-owned) start
    assert starts[0].data.get("ownerMessageId") and not starts[1].data.get("ownerMessageId")
    assert starts[1].created_at - starts[0].created_at >= LEASE - 0.1


async def test_a_body_that_cannot_be_cut_off_exits_the_worker_before_its_redelivery(  # type: ignore[no-untyped-def]
    tmp_path: Path, spawn_worker, crash_world
) -> None:
    """A sync body runs in a thread, which no fence can cancel: the worker exits before its
    delivery can be redelivered (an async body is cut off instead, see test_fencing), and
    the redelivery's owner recovery finishes the run."""
    db = crash_world.arg
    marker = str(tmp_path / "marker")
    # A 1 s visibility trips a fence after half a second without a renewal: at load 8-21 the
    # recovering worker fenced its own delivery of the 1.5 s body under a 2.5 s bound, exited
    # as a sync body must, and left the run with no worker (not done within 30 s). At 2 s
    # the fence waits a second for a renewal; the body (3 s) outlasts the first worker's
    # give-up (5/6 of the visibility after its last renewal) and stays inside the second
    # worker's bound (5 s), and each bound plus the visibility stays below the lease.
    env = {
        "WORKFLOW_INLINE_OWNERSHIP_LEASE_SECONDS": "7.5",
        "WAYLINE_MAX_INVOCATION_SECONDS": "0.5",
        "WAYLINE_VISIBILITY_SECONDS": "2",
    }
    async with crash_world.open() as world:
        client = wayline.Client(world)
        first = spawn_worker(db, **{**crash_world.env, **env})
        handle = await client.start(flows.single_slow_sync, marker, 3.0)
        assert await asyncio.to_thread(first.wait, 15) == 70  # past the bound: it exits
        env["WAYLINE_MAX_INVOCATION_SECONDS"] = "5"
        spawn_worker(db, **{**crash_world.env, **env})
        assert await handle.result(timeout=30) == "done"
    assert flows.lines(marker) == ["attempt 1", "attempt 2"]


async def test_a_cancel_compensates_a_dead_owners_step_as_unknown(
    tmp_path: Path, spawn_worker, crash_world
) -> None:  # type: ignore[no-untyped-def]
    """The unwind waits for a running owned step, but not for a dead owner: once the owner is
    SIGKILLed, its own redelivery compensates the step as an unknown outcome, at once (not
    after the lease), and the forward body does not run again."""
    db = crash_world.arg
    marker = str(tmp_path / "m")
    async with crash_world.open() as world:
        client = wayline.Client(world)
        first = spawn_worker(db, **crash_world.env)
        handle = await client.start(flows.pay_then_wait, marker, 4.0)
        await _until_lines(marker, 1)
        assert await client.cancel(handle.run_id)

        async def unwinding() -> bool:
            events = await handle.events()
            return bool(of_type(events, EventType.RUN_COMPENSATING))

        await wait_for(unwinding)  # the cancel's wake saw the owned step and waits for it
        await asyncio.sleep(0.3)
        assert flows.lines(marker) == ["forward-start"]
        os.kill(first.pid, signal.SIGKILL)
        first.wait(timeout=10)
        spawn_worker(db, **crash_world.env)
        try:
            await handle.result(timeout=30)
        except wayline.RunCancelledError:
            pass
        assert await handle.status() is wayline.RunStatus.CANCELLED
    assert flows.lines(marker) == ["forward-start", "compensate unknown"]
