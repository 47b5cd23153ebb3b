"""Finally blocks, races, fan-outs and killed workers mid-group: scenarios from other durable
engines' end-to-end suites (Temporal's ``features`` repository and Python SDK tests, DBOS
Transact's ``test_dbos.py`` and ``test_queue.py``, Inngest's SDK function cases, Restate's
verification runs, Hatchet's and Airflow's), ported to Wayline as black-box tests on every world.
Each docstring names what it ports. None repeats a scenario of ``test_peer_scenarios.py`` or the
other ``test_ported_*.py`` files."""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

import wayline
from tests.runtime.flows import lines, mark
from tests.runtime.harness import Engine, holds_nothing, of_type, settings, wait_for
from wayline._core.events import EventType


def _token() -> str:
    return f"p4-{uuid.uuid4().hex[:12]}"


def _marked(path: str, label: str, times: int = 1) -> Any:
    async def check() -> bool:
        return lines(path).count(label) >= times

    return check


@wayline.step(max_retries=0)
async def p4_mark(path: str, label: str) -> str:
    mark(path, label)
    return label


@wayline.step(max_retries=0)
async def p4_quick(n: int) -> int:
    return n


@wayline.workflow
async def p4_plain(n: int) -> int:
    return await p4_quick(n)


# --- a workflow's finally block (Temporal Python SDK: eviction of a waiting workflow) ---------


@wayline.workflow
async def p4_finally(path: str, token: str) -> Any:
    try:
        await p4_mark(path, "before")
        return await wayline.create_hook(token)
    finally:
        await p4_mark(path, "cleanup")


async def test_a_step_in_a_finally_block_runs_when_the_workflow_gets_there_only(
    engine: Engine, tmp_path: Path
) -> None:
    """Temporal's Python SDK tears a cached workflow down on eviction without running the
    activities its ``finally`` blocks would start. Here a run suspended on a hook has its
    replay dropped at the end of each delivery: the step of its ``finally`` must not run
    then (it used to, as a plain call the log never recorded); it runs once, as a step, when
    the workflow really leaves the ``try``. A cancelled run's unwind is its compensations:
    the ``finally`` step does not run."""
    path, token = str(tmp_path / "log"), _token()
    async with engine.worker([p4_finally]) as worker:
        handle = await engine.client.start(p4_finally, path, token)
        await wait_for(lambda: engine.world.get_hook(token))
        await holds_nothing(worker)  # the delivery that suspended the run has ended
        assert lines(path) == ["before"]
        await engine.client.resume_hook(token, {"ok": 1})
        assert await handle.result(timeout=20) == {"ok": 1}
        assert lines(path) == ["before", "cleanup"]
        created = of_type(await handle.events(), EventType.STEP_CREATED)
        assert [e.data["input"]["args"][1] for e in created] == ["before", "cleanup"]

        cpath, ctoken = str(tmp_path / "cancelled"), _token()
        cancelled = await engine.client.start(p4_finally, cpath, ctoken)
        await wait_for(lambda: engine.world.get_hook(ctoken))
        await engine.client.cancel(cancelled.run_id)
        with pytest.raises(wayline.RunCancelledError):
            await cancelled.result(timeout=20)
    assert lines(cpath) == ["before"]


# --- asyncio.timeout in a workflow (Temporal: asyncio timeouts are durable timers there) ------


@wayline.step(max_retries=0)
async def p4_slowish(n: int) -> int:
    await asyncio.sleep(0.3)
    return n


@wayline.workflow
async def p4_asyncio_timeout(n: int) -> int:
    async with asyncio.timeout(0.05):
        return await p4_slowish(n)


async def test_asyncio_timeout_in_a_workflow_fails_the_run_clearly(engine: Engine) -> None:
    """Temporal's Python SDK runs workflows on its own event loop, where ``asyncio.timeout``
    and ``wait_for`` become durable timers. Wayline's replay is no asyncio task: the timeout
    armed a cancel of the worker's delivery, which cut off the step running under it and
    left the run stuck for the step's lease. It now fails the run at once
    (``NON_DETERMINISTIC_AWAIT``) saying what to use, and the worker serves on."""
    async with engine.worker([p4_asyncio_timeout, p4_plain]):
        handle = await engine.client.start(p4_asyncio_timeout, 1)
        with pytest.raises(wayline.RunFailedError, match="NON_DETERMINISTIC_AWAIT") as caught:
            await handle.result(timeout=20)
        assert "asyncio.timeout" in str(caught.value) and "wayline.race" in str(caught.value)
        assert await (await engine.client.start(p4_plain, 2)).result(timeout=20) == 2
    assert not of_type(await handle.events(), EventType.STEP_CREATED)


# --- a step error turned into the workflow's own (Inngest change_step_error) ------------------


class P4OrderError(Exception):
    pass


@wayline.step(max_retries=0)
async def p4_fails(msg: str) -> None:
    raise ValueError(msg)


@wayline.workflow
async def p4_rethrows() -> None:
    try:
        await p4_fails("inner")
    except wayline.StepFailedError as err:
        raise P4OrderError(f"order rejected: {err.error.get('message')}") from err


async def test_a_caught_step_error_raised_again_as_another_fails_the_run_with_that_one(
    engine: Engine,
) -> None:
    """Inngest ``change_step_error`` (catch ``StepError``, raise ``MyError("I am new")``: the
    run fails with the new error): the run's recorded error is the workflow's own class and
    message, not the step's."""
    async with engine.worker([p4_rethrows]):
        handle = await engine.client.start(p4_rethrows)
        with pytest.raises(wayline.RunFailedError, match="order rejected"):
            await handle.result(timeout=20)
    [failed] = of_type(await handle.events(), EventType.RUN_FAILED)
    assert failed.data["error"]["name"] == "P4OrderError", failed.data
    assert "inner" in failed.data["error"]["message"]


# --- parallel groups of sequential steps (Inngest parallel_group_of_sequential_steps) ---------


@wayline.step(max_retries=2, retry_delay=0.01)  # a killed attempt counts as one
async def p4_seq_step(path: str, label: str) -> str:
    first = label not in lines(path)
    mark(path, label)
    if first and label == "2b":
        await asyncio.sleep(60)  # the worker is killed under it
    return label


async def _p4_branch(path: str, prefix: str) -> list[str]:
    return [await p4_seq_step(path, f"{prefix}a"), await p4_seq_step(path, f"{prefix}b")]


@wayline.workflow
async def p4_groups(path: str) -> dict[str, Any]:
    both = await wayline.gather(_p4_branch(path, "1"), _p4_branch(path, "2"))
    after = await p4_seq_step(path, "after")
    return {"groups": both, "after": after}


async def test_parallel_groups_of_sequential_steps_survive_a_killed_worker(
    engine: Engine, tmp_path: Path
) -> None:
    """Inngest ``parallel_group_of_sequential_steps`` (``step.parallel`` of two functions,
    each running two steps in order, then a step after: every step body once), with the
    worker killed inside the second group's second step: after recovery each body ran once
    but the killed one, which ran twice, and the groups keep their order."""
    path = str(tmp_path / "log")
    worker = wayline.Worker(engine.world, [p4_groups], settings=settings())
    await worker.start()
    handle = await engine.client.start(p4_groups, path)
    await wait_for(_marked(path, "2b"))

    async def others_recorded() -> bool:  # 1b runs beside 2b: killed unrecorded, it reruns
        return len(of_type(await handle.events(), EventType.STEP_COMPLETED)) == 3

    await wait_for(others_recorded)
    await worker.close(graceful=False)
    async with engine.worker([p4_groups]):
        out = await handle.result(timeout=30)
    assert out == {"groups": [["1a", "1b"], ["2a", "2b"]], "after": "after"}
    counts = {label: lines(path).count(label) for label in ("1a", "1b", "2a", "2b", "after")}
    assert counts == {"1a": 1, "1b": 1, "2a": 1, "2b": 2, "after": 1}


# --- a parent signals its child (Temporal features child_workflow/signal, DBOS send) ----------

_CLIENTS: dict[str, wayline.Client] = {}


@wayline.step(max_retries=20, retry_delay=0.05)
async def p4_signal(path: str, token: str, payload: Any) -> str:
    """Resumes another run's hook under this step's idempotency key; the first attempt that
    got through loses its answer (raises after sending), so the retry sends again."""
    key = wayline.step_context().idempotency_key
    run_id = await _CLIENTS[path].resume_hook(token, payload, delivery_id=key)
    first = "sent" not in lines(path)
    mark(path, "sent")
    if first:
        raise OSError("the answer was lost after the payload was sent")
    return run_id


@wayline.workflow
async def p4_kid(token: str) -> dict[str, Any]:
    got = await wayline.create_hook(token)
    return {"kid": wayline.workflow_info().run_id, "got": got}


@wayline.workflow
async def p4_parent(path: str) -> dict[str, Any]:
    token = f"p4-signal-{wayline.uuid4()}"
    kid, sent_to = await wayline.gather(
        wayline.child(p4_kid, token), p4_signal(path, token, {"unblock": "yes"})
    )
    return {"kid": kid, "sent_to": sent_to}


async def test_a_parent_signals_its_child_once_through_a_retried_step(
    engine: Engine, tmp_path: Path
) -> None:
    """Temporal ``features`` child_workflow/signal (a parent starts a child, signals it to
    unblock, returns the child's result) and DBOS's idempotent ``send`` from a workflow: the
    parent's step resumes the child's hook under its idempotency key, is retried (the child's
    hook not there yet, then a lost answer), and the child receives the payload once."""
    path = str(tmp_path / "log")
    _CLIENTS[path] = engine.client
    try:
        async with engine.worker([p4_parent, p4_kid]):
            handle = await engine.client.start(p4_parent, path)
            out = await handle.result(timeout=30)
    finally:
        del _CLIENTS[path]
    kid = out["kid"]
    assert kid["got"] == {"unblock": "yes"} and out["sent_to"] == kid["kid"]
    received = of_type(await engine.client.handle(kid["kid"]).events(), EventType.HOOK_RECEIVED)
    assert len(received) == 1
    assert lines(path) == ["sent", "sent"]


# --- waits with a deadline (Temporal wait_condition timeout, DBOS recv timeout) ---------------


@wayline.workflow
async def p4_keep_waiting(token: str) -> list[Any]:
    hook = wayline.create_hook(token)
    first, _ = await wayline.race(hook, wayline.sleep(0.2))
    return [first, await hook]


async def test_a_wait_that_lost_its_race_with_a_timer_still_gets_the_later_payload(
    engine: Engine,
) -> None:
    """Temporal's ``wait_condition(timeout=)`` then waiting again on the same signal, and
    Inngest's ``waitForEvent`` re-armed: the sleep wins the race, the hook stays live, and
    the payload sent afterwards is what the second ``await`` gets."""
    token = _token()
    async with engine.worker([p4_keep_waiting]):
        handle = await engine.client.start(p4_keep_waiting, token)

        async def slept() -> bool:
            return bool(of_type(await handle.events(), EventType.WAIT_COMPLETED))

        await wait_for(slept)
        await engine.client.resume_hook(token, {"late": True})
        assert await handle.result(timeout=20) == [1, {"late": True}]


@wayline.workflow
async def p4_zero_timeout(token: str) -> list[Any]:
    out: list[Any] = []
    try:
        out.append(await wayline.create_hook(token, timeout=0))
    except wayline.HookTimeout:
        out.append("timed out")
    out.append(await wayline.create_hook(token, timeout="1h"))
    return out


async def test_a_wait_with_a_zero_timeout_times_out_and_frees_its_token(engine: Engine) -> None:
    """DBOS ``recv(timeout_seconds=0)`` (returns at once with nothing): a hook with a zero
    timeout raises ``HookTimeout`` without waiting, and the run's next hook on the same token
    receives the payload."""
    token = _token()
    async with engine.worker([p4_zero_timeout]):
        handle = await engine.client.start(p4_zero_timeout, token)

        async def second_hook() -> bool:
            return len(of_type(await handle.events(), EventType.HOOK_CREATED)) == 2

        await wait_for(second_hook)
        await wait_for(lambda: engine.world.get_hook(token))
        await engine.client.resume_hook(token, "now")
        assert await handle.result(timeout=20) == ["timed out", "now"]


@wayline.workflow
async def p4_sleep_until(delay: float) -> dict[str, Any]:
    deadline = wayline.now() + timedelta(seconds=delay)
    await wayline.sleep(deadline - wayline.now())
    return {"woke_after_deadline": wayline.now() >= deadline}


async def test_a_sleep_until_a_time_computed_from_workflow_time(engine: Engine) -> None:
    """Inngest ``sleep_until`` / Temporal ``workflow.sleep(until - now)``: a ``timedelta``
    computed from ``wayline.now()`` is a sleep, and the workflow time after it is past the
    deadline on the replay that wakes it."""
    async with engine.worker([p4_sleep_until]):
        handle = await engine.client.start(p4_sleep_until, 0.2)
        assert await handle.result(timeout=20) == {"woke_after_deadline": True}


# --- many signals at once (Temporal: signals from many clients, none lost) --------------------


@wayline.workflow
async def p4_collect(token: str, n: int) -> list[Any]:
    out: list[Any] = []
    async for payload in wayline.create_hook(token):
        out.append(payload)
        if len(out) == n:
            break
    return out


async def test_twenty_payloads_sent_at_once_are_each_received_once(engine: Engine) -> None:
    """Temporal's signal tests with many concurrent senders, DBOS ``send`` from many
    callers: twenty ``resume_hook`` calls at once on one token (no delivery ids, so none is
    a retry of another) are each received once by the looping workflow."""
    token = _token()
    async with engine.worker([p4_collect]):
        handle = await engine.client.start(p4_collect, token, 20)
        await wait_for(lambda: engine.world.get_hook(token))
        await asyncio.gather(*(engine.client.resume_hook(token, i) for i in range(20)))
        out = await handle.result(timeout=30)
    assert sorted(out) == list(range(20))


@wayline.workflow
async def p4_hook_twice(token: str) -> list[Any]:
    hook = wayline.create_hook(token)
    return await wayline.gather(hook, hook, hook)


async def test_one_hook_awaited_by_several_gather_members_gives_each_its_first_payload(
    engine: Engine,
) -> None:
    """Temporal's ``wait_condition`` shared by several coroutines on one signal: one hook
    given to ``gather`` three times settles all three with its first payload."""
    token = _token()
    async with engine.worker([p4_hook_twice]):
        handle = await engine.client.start(p4_hook_twice, token)
        await wait_for(lambda: engine.world.get_hook(token))
        await engine.client.resume_hook(token, {"n": 1})
        assert await handle.result(timeout=20) == [{"n": 1}] * 3


# --- every outcome of a group (Airflow trigger rule all_done, Promise.allSettled) ------------


@wayline.step(max_retries=0)
async def p4_maybe(n: int) -> int:
    if n % 2:
        raise ValueError(f"odd {n}")
    return n


async def _p4_settled(n: int) -> dict[str, Any]:
    try:
        return {"ok": await p4_maybe(n)}
    except wayline.StepFailedError as err:
        return {"error": err.error.get("message")}


@wayline.workflow
async def p4_all_done() -> list[dict[str, Any]]:
    return await wayline.gather(*(_p4_settled(n) for n in range(4)))


async def test_a_group_that_collects_every_outcome_whatever_fails(engine: Engine) -> None:
    """Airflow's ``all_done`` trigger rule and ``Promise.allSettled``: a gather of
    coroutines that each catch their step's failure returns every outcome in argument
    order; the failures do not cut the group short."""
    async with engine.worker([p4_all_done]):
        handle = await engine.client.start(p4_all_done)
        out = await handle.result(timeout=20)
    assert out[0] == {"ok": 0} and out[2] == {"ok": 2}
    assert "odd 1" in out[1]["error"] and "odd 3" in out[3]["error"]


# --- a race's losing step and the saga (Temporal saga sample with a deadline) -----------------


def _p4_release(path: str, label: str) -> None:
    result = wayline.step_context().forward_result
    mark(path, f"release {label} {result}")


@wayline.step(max_retries=0, compensate=_p4_release)
async def p4_hold(path: str, label: str) -> str:
    mark(path, f"hold {label}")
    while not lines(f"{path}.go"):  # noqa: ASYNC110 - a file the test writes
        await asyncio.sleep(0.01)
    return f"held-{label}"


@wayline.workflow
async def p4_race_then_fail(path: str) -> None:
    winner, _ = await wayline.race(p4_hold(path, "slow"), wayline.sleep(600))
    raise RuntimeError(f"gave up waiting (winner {winner})")


async def test_the_losing_step_of_a_race_is_compensated_when_the_run_fails(
    engine: Engine, tmp_path: Path
) -> None:
    """Temporal's saga sample with an activity raced against a timer: the timer wins, the
    workflow fails, and the activity that was still running is reversed. Wayline lets the
    running body settle before the unwind, then compensates it once, with its result.

    The order is set by events, not by lengths: the timer is fired (``wake``) once the body
    runs, and the body returns once the timer's completion is in the log. A 0.4 s body raced
    against a 0.05 s sleep lost the race under load (the sleep woken late, or the body not
    begun when it was)."""
    path = str(tmp_path / "log")
    async with engine.worker([p4_race_then_fail]):
        handle = await engine.client.start(p4_race_then_fail, path)
        await wait_for(lambda: _has_line(path, "hold slow"), timeout=30)
        assert await handle.wake() != []

        async def fired() -> bool:
            return bool(of_type(await handle.events(), EventType.WAIT_COMPLETED))

        await wait_for(fired, timeout=30)
        mark(f"{path}.go", "go")
        with pytest.raises(wayline.RunFailedError, match="winner 1"):
            await handle.result(timeout=30)
    assert lines(path) == ["hold slow", "release slow held-slow"]


async def _has_line(path: str, line: str) -> bool:
    return line in lines(path)


# --- ending a run that already ended (Temporal, DBOS workflow management) ---------------------


async def test_cancel_terminate_and_fail_of_an_ended_run_change_nothing(engine: Engine) -> None:
    """Temporal's cancel/terminate of a closed workflow and DBOS ``cancel_workflow`` of a
    completed one: each answers False, the run stays completed with its result, and its log
    gains nothing."""
    async with engine.worker([p4_plain]):
        handle = await engine.client.start(p4_plain, 5)
        assert await handle.result(timeout=20) == 5
        before = await handle.events()
        assert await engine.client.cancel(handle.run_id) is False
        assert await engine.client.terminate(handle.run_id) is False
        assert await engine.client.fail(handle.run_id) is False
        assert await handle.status() == wayline.RunStatus.COMPLETED
        assert await handle.result(timeout=5) == 5
        assert len(await handle.events()) == len(before)


# --- a Restate-style verification: several runs, a worker killed twice ------------------------


@wayline.step(max_retries=3, retry_delay=0.01)
async def p4_add(path: str, run: int, i: int, total: int) -> int:
    mark(path, f"{run}:{i}")
    await asyncio.sleep(0.02)
    return total + i


@wayline.workflow
async def p4_counter(path: str, run: int) -> int:
    total = 0
    for i in range(1, 5):
        total = await p4_add(path, run, i, total)
        await wayline.sleep(0.05)
    return total


async def test_several_runs_finish_right_across_two_killed_workers(
    engine: Engine, tmp_path: Path
) -> None:
    """Restate's verification runs (workers killed while many invocations progress; every
    invocation ends with the expected state): six runs of a loop of steps and sleeps, two
    workers killed along the way; each run returns 10, its log holds each step completed
    once, and a body ran at most once per worker (again only where a worker died under
    it)."""
    path = str(tmp_path / "log")
    handles = [await engine.client.start(p4_counter, path, run) for run in range(6)]
    for kill_after in (4, 12):
        worker = wayline.Worker(engine.world, [p4_counter], settings=settings())
        await worker.start()

        async def progressed(n: int = kill_after) -> bool:
            return len(lines(path)) >= n

        await wait_for(progressed, timeout=30)
        await worker.close(graceful=False)
    async with engine.worker([p4_counter]):
        results = [await h.result(timeout=60) for h in handles]
    assert results == [10] * 6
    for h in handles:
        completed = of_type(await h.events(), EventType.STEP_COMPLETED)
        assert len(completed) == 4
    runs = lines(path)
    for run in range(6):
        for i in range(1, 5):
            assert 1 <= runs.count(f"{run}:{i}") <= 3, runs


# --- a race's losing coroutine and its finally (Temporal: pending coroutines at completion) --


async def _p4_guarded(path: str, token: str) -> Any:
    try:
        return await wayline.create_hook(token)
    finally:
        await p4_mark(path, "loser cleanup")


@wayline.workflow
async def p4_race_guarded(path: str, token: str) -> int:
    timer = wayline.sleep(0.05)  # before the coroutine: a sleep may rebuild the replay
    winner, _ = await wayline.race(_p4_guarded(path, token), timer)
    await p4_mark(path, "after race")
    return winner


async def test_the_finally_of_a_race_loser_runs_no_step_when_the_run_ends(
    engine: Engine, tmp_path: Path
) -> None:
    """Temporal's Python SDK cancels a workflow's pending coroutines when it completes and
    starts no activity from them. A coroutine that lost a race still waits when its run
    completes; its replay closes it, and the step in its ``finally`` runs neither as a step
    nor, as it used to when the garbage collector closed it, as a plain call."""
    path, token = str(tmp_path / "log"), _token()
    async with engine.worker([p4_race_guarded]):
        handle = await engine.client.start(p4_race_guarded, path, token)
        assert await handle.result(timeout=20) == 1
        await asyncio.sleep(0.2)
    assert lines(path) == ["after race"]


# --- fan-out (Hatchet's and Temporal's child fan-out samples) ----------------------------------


@wayline.workflow
async def p4_leaf(i: int) -> dict[str, Any]:
    return {"i": await p4_quick(i * i), "parent": wayline.workflow_info().parent_run_id}


@wayline.workflow
async def p4_fan_out(n: int) -> list[dict[str, Any]]:
    return await wayline.gather(*(wayline.child(p4_leaf, i) for i in range(n)))


async def test_a_fan_out_of_twenty_children_returns_in_argument_order(engine: Engine) -> None:
    """Hatchet's fan-out example and Temporal's parallel child workflows: twenty children
    started at once by one gather, each run once with the parent as its parent, results in
    argument order whatever order they finished in."""
    async with engine.worker([p4_fan_out, p4_leaf]):
        handle = await engine.client.start(p4_fan_out, 20)
        out = await handle.result(timeout=60)
    assert [c["i"] for c in out] == [i * i for i in range(20)]
    assert {c["parent"] for c in out} == {handle.run_id}
    created = of_type(await handle.events(), EventType.CHILD_CREATED)
    assert len(created) == 20
    assert len(await engine.world.list_runs(workflow="p4_leaf")) >= 20


# --- streams of parallel steps (DBOS write_stream/read_stream) --------------------------------


@wayline.step(max_retries=0)
async def p4_writer(name: str, n: int) -> int:
    out = wayline.stream(name)
    for i in range(n):
        await out.write({"name": name, "i": i})
        await asyncio.sleep(0.01)
    return n


@wayline.workflow
async def p4_two_streams() -> list[int]:
    return await wayline.gather(p4_writer("left", 5), p4_writer("right", 7))


async def test_two_parallel_steps_write_two_streams_each_whole_and_in_order(
    engine: Engine,
) -> None:
    """DBOS ``write_stream``/``read_stream`` with several writers: two gather members write
    their own stream at the same time; a reader of each gets only that stream's records, in
    write order, and ends when its writer settles."""
    async with engine.worker([p4_two_streams]):
        handle = await engine.client.start(p4_two_streams)

        async def read(name: str) -> list[Any]:
            return [c.data async for c in engine.client.stream(handle.run_id, name)]

        left, right = await asyncio.wait_for(asyncio.gather(read("left"), read("right")), 30)
        assert await handle.result(timeout=20) == [5, 7]
    assert left == [{"name": "left", "i": i} for i in range(5)]
    assert right == [{"name": "right", "i": i} for i in range(7)]


# --- the first of two events (Inngest waitForEvent on several, Temporal any signal) -----------


@wayline.workflow
async def p4_either(approve: str, reject: str) -> list[Any]:
    yes, no = wayline.create_hook(approve), wayline.create_hook(reject)
    first = await wayline.any(yes, no)
    other = await no if first.get("by") == "approver" else await yes
    return [first, other]


async def test_the_first_of_two_hooks_wins_and_the_other_still_takes_its_payload(
    engine: Engine,
) -> None:
    """Inngest's ``waitForEvent`` for one of several events and Temporal's
    ``wait_condition`` over two signals: ``wayline.any`` of two hooks returns the first
    payload; the other hook is still live and gets its own payload afterwards."""
    approve, reject = _token(), _token()
    async with engine.worker([p4_either]):
        handle = await engine.client.start(p4_either, approve, reject)
        await wait_for(lambda: engine.world.get_hook(reject))
        await engine.client.resume_hook(approve, {"by": "approver"})
        await engine.client.resume_hook(reject, {"by": "auditor"})
        assert await handle.result(timeout=20) == [{"by": "approver"}, {"by": "auditor"}]


# --- an async context manager around a wait (Temporal: activities in __aexit__) --------------


class _P4Lease:
    def __init__(self, path: str) -> None:
        self.path = path

    async def __aenter__(self) -> _P4Lease:
        await p4_mark(self.path, "take lease")
        return self

    async def __aexit__(self, *exc: object) -> None:
        await p4_mark(self.path, "give lease back")


@wayline.workflow
async def p4_leased(path: str, token: str) -> Any:
    async with _P4Lease(path):
        return await wayline.create_hook(token)


async def test_an_async_with_exit_runs_its_step_once_when_the_block_ends(
    engine: Engine, tmp_path: Path
) -> None:
    """Temporal workflows that start an activity in an async context manager's
    ``__aexit__``: the exit's step runs when the block really ends, once, and not each time
    the run's replay is dropped while it waits inside the block."""
    path, token = str(tmp_path / "log"), _token()
    async with engine.worker([p4_leased]) as worker:
        handle = await engine.client.start(p4_leased, path, token)
        await wait_for(lambda: engine.world.get_hook(token))
        await holds_nothing(worker)  # the delivery that suspended the run has ended
        assert lines(path) == ["take lease"]
        await engine.client.resume_hook(token, "ok")
        assert await handle.result(timeout=20) == "ok"
    assert lines(path) == ["take lease", "give lease back"]


# --- default arguments (DBOS: a workflow started without its optional arguments) -------------


@wayline.workflow
async def p4_defaults(token: str, n: int = 2, *, label: str = "x") -> list[Any]:
    first = await p4_quick(n)
    await wayline.create_hook(token)  # the rest runs in a replay of the first part
    return [first, await p4_quick(n + 1), label]


async def test_a_workflows_default_arguments_hold_across_its_replays(engine: Engine) -> None:
    """DBOS starts a workflow without its optional arguments and recovers it the same way:
    the defaults of positional and keyword-only parameters apply on the first run and on
    every replay, and an explicit keyword overrides one."""
    token, other = _token(), _token()
    async with engine.worker([p4_defaults]):
        plain = await engine.client.start(p4_defaults, token)
        given = await engine.client.start(p4_defaults, other, label="y")
        for t in (token, other):
            await wait_for(lambda t=t: engine.world.get_hook(t))
            await engine.client.resume_hook(t, None)
        assert await plain.result(timeout=20) == [2, 3, "x"]
        assert await given.result(timeout=20) == [2, 3, "y"]
