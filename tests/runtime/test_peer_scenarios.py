"""Scenarios the end-to-end suites of other durable engines check (Temporal's samples and
features, DBOS's test_dbos/test_queue/test_workflow_cancel, Restate's verification, Inngest's
SDK tests), ported to Wayline as black-box tests on every world."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

import pytest

import wayline
import wayline.testing
from tests.runtime.flows import lines, mark
from tests.runtime.harness import Engine, of_type, settings, wait_for
from wayline._core.events import EventType

# --- steps and workflows ---------------------------------------------------------------


@wayline.step(max_retries=0)
async def peer_mark(path: str, label: str) -> str:
    mark(path, label)
    return label


@wayline.step(max_retries=2, retry_delay=0.01)  # a killed attempt counts as one
async def peer_hang_once(path: str, label: str) -> str:
    """Hangs on its first execution (the worker is killed under it), returns on the next."""
    first = label not in lines(path)
    mark(path, label)
    if first:
        await asyncio.sleep(60)
    return label


@wayline.workflow
async def peer_gather_then_kill(path: str) -> list[str]:
    got = await wayline.gather(
        peer_mark(path, "a"), peer_hang_once(path, "slow"), peer_mark(path, "b")
    )
    after = await peer_mark(path, "after")
    return [*got, after]


class InsufficientFunds(Exception):
    pass


@wayline.step(max_retries=2, retry_delay=0.01)
async def peer_always_fails(path: str) -> str:
    mark(path, "try")
    raise InsufficientFunds(f"balance too low (attempt {wayline.step_context().attempt})")


@wayline.workflow
async def peer_catch_and_continue(path: str) -> dict[str, Any]:
    try:
        await peer_always_fails(path)
    except wayline.StepFailedError as err:
        caught = {"step": err.step_name, "name": err.error.get("name"), "msg": str(err)}
    else:  # pragma: no cover - the step always fails
        caught = {}
    caught["next"] = await peer_mark(path, "next")
    return caught


@wayline.workflow
async def peer_uncaught(path: str) -> str:
    return await peer_always_fails(path)


@wayline.workflow
async def peer_raises_itself(kind: str) -> None:
    if kind == "custom":
        raise InsufficientFunds("raised by the workflow body")
    raise ValueError("plain value error")


@wayline.workflow
async def peer_sleeper(seconds: float) -> float:
    start = wayline.now().timestamp()
    await wayline.sleep(seconds)
    return wayline.now().timestamp() - start


@wayline.workflow
async def peer_month(path: str) -> float:
    await peer_mark(path, "before")
    start = wayline.now().timestamp()
    await wayline.sleep("30d")
    await peer_mark(path, "after")
    return wayline.now().timestamp() - start


@wayline.workflow
async def peer_two_hooks(prefix: str) -> list[Any]:
    first = wayline.create_hook(f"{prefix}:1")
    second = wayline.create_hook(f"{prefix}:2")
    return await wayline.gather(first, second)


@wayline.workflow
async def peer_hook_after_step(path: str, token: str) -> Any:
    await peer_mark(path, "ready")
    return await wayline.create_hook(token)


@wayline.workflow
async def peer_signals(token: str, n: int) -> list[Any]:
    got = []
    async for payload in wayline.create_hook(token):
        got.append(payload)
        if len(got) == n:
            break
    return got


@wayline.workflow
async def peer_hook_timeout(token: str) -> str:
    try:
        await wayline.create_hook(token, timeout=0.2)
    except wayline.HookTimeout:
        return "timed out"
    return "answered"


@wayline.workflow
async def peer_counted(path: str, tag: str) -> str:
    return await peer_mark(path, tag)


def _undo(path: str, label: str) -> None:
    mark(path, f"undo {label}")


@wayline.step(max_retries=0, compensate=_undo)
async def peer_do(path: str, label: str) -> str:
    mark(path, f"do {label}")
    return label


@wayline.workflow
async def peer_saga_sleeps(path: str) -> str:
    for label in ("a", "b", "c"):
        await peer_do(path, label)
    await wayline.sleep(3600)
    return "never"


@wayline.workflow
async def peer_child_sleeps(path: str) -> str:
    await peer_mark(path, "child started")
    await wayline.sleep(3600)
    return "child woke"


@wayline.workflow
async def peer_parent_of_sleeper(path: str) -> str:
    try:
        return await wayline.child(peer_child_sleeps, path)
    except wayline.ChildFailedError as err:
        return f"child {err.status}"


@wayline.step
async def peer_square(n: int) -> int:
    return n * n


@wayline.workflow
async def peer_square_child(n: int) -> int:
    return await peer_square(n)


@wayline.workflow
async def peer_fan_out(n: int) -> list[int]:
    return await wayline.gather(*[wayline.child(peer_square_child, i) for i in range(n)])


@wayline.step
async def peer_echo(value: Any) -> Any:
    return value


@wayline.workflow
async def peer_echo_flow(value: Any) -> Any:
    back = await peer_echo(value)
    return {"same": back == value, "value": back}


@wayline.step
async def peer_big(size: int) -> str:
    return "y" * size


@wayline.workflow
async def peer_big_flow(blob: str) -> dict[str, Any]:
    echoed = await peer_echo(blob)
    made = await peer_big(len(blob) * 2)
    return {"in": len(echoed), "made": made}


@wayline.workflow
async def peer_returns_none(path: str) -> None:
    await peer_mark(path, "ran")


@wayline.workflow
async def peer_kwonly(a: int, *, b: str = "dflt", c: list[int]) -> dict[str, Any]:
    return {"a": a, "b": b, "c": c}


@wayline.step
async def peer_pair(a: int, b: int):  # type: ignore[no-untyped-def]  # no hint on purpose
    return (a, b)


@wayline.workflow
async def peer_untyped_tuple(token: str) -> list[str]:
    pair = await peer_pair(1, 2)
    seen = type(pair).__name__
    await peer_echo(seen)  # what the first execution saw is recorded in the log
    await wayline.create_hook(token)
    return [seen, type(pair).__name__]


@wayline.workflow
async def peer_random_stable(token: str) -> list[Any]:
    before = [wayline.random(), str(wayline.uuid4())]
    recorded = await peer_echo(before)
    await wayline.create_hook(token)
    return [recorded, before]


def _tokens() -> str:
    return f"peer-{uuid.uuid4().hex[:12]}"


# --- recovery ------------------------------------------------------------------------------


async def test_a_killed_worker_reruns_only_the_unfinished_gather_member(
    engine: Engine, tmp_path: Path
) -> None:
    """DBOS test_dbos recovery / Temporal worker-restart: completed siblings never re-run."""
    path = str(tmp_path / "log")
    worker = wayline.Worker(engine.world, [peer_gather_then_kill], settings=settings())
    await worker.start()
    handle = await engine.client.start(peer_gather_then_kill, path)

    async def three() -> bool:
        # "a" and "b" recorded completed (a line is written before its step's completion is
        # appended: a kill between the two is a death mid-body, not a completed sibling), and
        # the slow member under way
        done = of_type(await handle.events(), EventType.STEP_COMPLETED)
        return len(done) == 2 and {"a", "b", "slow"} <= set(lines(path))

    await wait_for(three)
    await worker.close(graceful=False)
    async with engine.worker([peer_gather_then_kill]):
        assert await handle.result(timeout=20) == ["a", "slow", "b", "after"]
    got = lines(path)
    assert got.count("a") == 1 and got.count("b") == 1 and got.count("after") == 1
    assert got.count("slow") == 2  # the interrupted one ran again: at least once


async def test_a_sleep_survives_a_killed_worker(engine: Engine) -> None:
    worker = wayline.Worker(engine.world, [peer_sleeper], settings=settings())
    await worker.start()
    handle = await engine.client.start(peer_sleeper, 1.0)
    await wait_for(lambda: _has_event(engine, handle.run_id, EventType.WAIT_CREATED))
    await worker.close(graceful=False)
    async with engine.worker([peer_sleeper]):
        slept = await handle.result(timeout=20)
    assert slept >= 1.0
    (done,) = of_type(await handle.events(), EventType.WAIT_COMPLETED)
    (made,) = of_type(await handle.events(), EventType.WAIT_CREATED)
    # woke no earlier than asked: the sleep ends at its recorded time, one second after the
    # workflow time it was asked at (the stamp of the event it resumed on, which can be well
    # before wait_created's own stamp on a loaded machine)
    assert done.data["resumeAt"] == made.data["resumeAt"]
    assert done.created_at >= made.data["resumeAt"] - 0.01


async def test_a_month_long_sleep_with_time_skipping_runs_each_step_once(
    tmp_path: Path,
) -> None:
    path = str(tmp_path / "log")
    async with wayline.testing.Environment([peer_month]) as env:
        handle = await env.client.start(peer_month, path)
        assert await handle.result(timeout=20) >= 30 * 86400
    assert lines(path) == ["before", "after"]


# --- retries and errors -------------------------------------------------------------------


async def test_retries_spent_then_the_workflow_catches_and_continues(
    engine: Engine, tmp_path: Path
) -> None:
    path = str(tmp_path / "log")
    async with engine.worker([peer_catch_and_continue]):
        handle = await engine.client.start(peer_catch_and_continue, path)
        out = await handle.result(timeout=20)
    assert lines(path) == ["try", "try", "try", "next"]  # 1 + max_retries attempts
    assert out["step"] == "peer_always_fails"
    assert out["name"] == "InsufficientFunds"
    assert "InsufficientFunds" in out["msg"] and "balance too low (attempt 3)" in out["msg"]
    assert out["next"] == "next"


async def test_result_of_a_failed_run_raises_with_the_steps_error(
    engine: Engine, tmp_path: Path
) -> None:
    path = str(tmp_path / "log")
    async with engine.worker([peer_uncaught]):
        handle = await engine.client.start(peer_uncaught, path)
        with pytest.raises(wayline.RunFailedError) as caught:
            await handle.result(timeout=20)
    assert "InsufficientFunds" in str(caught.value)
    assert "balance too low (attempt 3)" in str(caught.value)
    assert (await handle.status()) is wayline.RunStatus.FAILED
    info = await engine.client.get_run(handle.run_id)
    assert info.error is not None and "balance too low" in info.error["message"]


@pytest.mark.parametrize("kind", ["custom", "value"])
async def test_an_exception_raised_by_the_workflow_body_fails_the_run(
    engine: Engine, kind: str
) -> None:
    async with engine.worker([peer_raises_itself]):
        handle = await engine.client.start(peer_raises_itself, kind)
        with pytest.raises(wayline.RunFailedError) as caught:
            await handle.result(timeout=20)
    error = caught.value.error
    if kind == "custom":
        assert (error["name"], error["message"]) == (
            "InsufficientFunds",
            "raised by the workflow body",
        )
    else:
        assert (error["name"], error["message"]) == ("ValueError", "plain value error")
    # the exception's type is in the message, as a step's is (and as `runs show` prints it)
    assert f"{error['name']}: {error['message']}" in str(caught.value)


# --- hooks --------------------------------------------------------------------------------


async def test_two_hooks_resumed_in_reverse_order_keep_argument_order(engine: Engine) -> None:
    prefix = _tokens()
    async with engine.worker([peer_two_hooks]):
        handle = await engine.client.start(peer_two_hooks, prefix)
        await wait_for(lambda: engine.world.get_hook(f"{prefix}:2"))
        await wait_for(lambda: engine.world.get_hook(f"{prefix}:1"))
        await engine.client.resume_hook(f"{prefix}:2", {"n": 2})
        await engine.client.resume_hook(f"{prefix}:1", {"n": 1})
        assert await handle.result(timeout=20) == [{"n": 1}, {"n": 2}]


async def test_a_hook_resumed_before_the_run_reaches_it_is_refused(
    engine: Engine, tmp_path: Path
) -> None:
    """The client refuses (nothing is queued for later); resumed once the run waits, it is
    delivered."""
    path, token = str(tmp_path / "log"), _tokens()
    handle = await engine.client.start(peer_hook_after_step, path, token)
    with pytest.raises(wayline.HookNotFoundError):
        await engine.client.resume_hook(token, "too early")
    async with engine.worker([peer_hook_after_step]):
        await wait_for(lambda: engine.world.get_hook(token))
        await engine.client.resume_hook(token, "in time")
        assert await handle.result(timeout=20) == "in time"


async def test_a_hook_takes_several_payloads_in_order(engine: Engine) -> None:
    """Temporal signals / Inngest waitForEvent in a loop."""
    token = _tokens()
    async with engine.worker([peer_signals]):
        handle = await engine.client.start(peer_signals, token, 3)
        await wait_for(lambda: engine.world.get_hook(token))
        for i in range(3):
            await engine.client.resume_hook(token, {"i": i, "s": "é🙂"})
        assert await handle.result(timeout=20) == [{"i": i, "s": "é🙂"} for i in range(3)]


async def test_a_hook_timeout_is_caught_and_the_run_goes_on(engine: Engine) -> None:
    token = _tokens()
    async with engine.worker([peer_hook_timeout]):
        handle = await engine.client.start(peer_hook_timeout, token)
        assert await handle.result(timeout=20) == "timed out"


# --- starting, idempotency, many runs -----------------------------------------------------


async def test_a_start_with_the_same_run_id_returns_the_same_run_and_result(
    engine: Engine, tmp_path: Path
) -> None:
    path = str(tmp_path / "log")
    run_id = "wf_" + uuid.uuid4().hex
    async with engine.worker([peer_counted]):
        first = await engine.client.start_with(
            wayline.StartOptions(run_id=run_id), peer_counted, path, "once"
        )
        again = await engine.client.start_with(
            wayline.StartOptions(run_id=run_id), peer_counted, path, "once"
        )
        assert first.run_id == again.run_id == run_id
        assert await again.result(timeout=20) == "once"
        assert await first.result(timeout=20) == "once"
        later = await engine.client.start_with(
            wayline.StartOptions(run_id=run_id), peer_counted, path, "once"
        )
        assert await later.result(timeout=20) == "once"
        await asyncio.sleep(0.2)
    assert lines(path) == ["once"]
    assert len(await engine.world.list_runs(workflow="peer_counted")) == 1


async def test_many_concurrent_runs_each_complete_exactly_once(
    engine: Engine, tmp_path: Path
) -> None:
    path = str(tmp_path / "log")
    n = 200
    async with engine.worker([peer_counted]):
        handles = await asyncio.gather(
            *[engine.client.start(peer_counted, path, f"r{i}") for i in range(n)]
        )
        results = await asyncio.gather(*[h.result(timeout=50) for h in handles])
    assert results == [f"r{i}" for i in range(n)]
    assert sorted(lines(path)) == sorted(f"r{i}" for i in range(n))
    assert len({h.run_id for h in handles}) == n


async def test_list_and_status_while_running(engine: Engine, tmp_path: Path) -> None:
    path, token = str(tmp_path / "log"), _tokens()
    handle = await engine.client.start(peer_hook_after_step, path, token)
    assert (await handle.status()) is wayline.RunStatus.PENDING
    async with engine.worker([peer_hook_after_step]):
        await wait_for(lambda: engine.world.get_hook(token))
        assert (await handle.status()) is wayline.RunStatus.RUNNING
        running = await engine.client.list_runs(status="running")
        assert [r.run_id for r in running] == [handle.run_id]
        assert await engine.client.list_runs(status="completed") == []
        await engine.client.resume_hook(token, 1)
        assert await handle.result(timeout=20) == 1
    done = await engine.client.list_runs(status=wayline.RunStatus.COMPLETED)
    assert [r.run_id for r in done] == [handle.run_id]
    assert await engine.client.list_runs(status="running") == []


# --- cancellation and compensation --------------------------------------------------------


async def test_cancel_during_a_sleep_compensates_in_reverse(engine: Engine, tmp_path: Path) -> None:
    path = str(tmp_path / "log")
    async with engine.worker([peer_saga_sleeps]):
        handle = await engine.client.start(peer_saga_sleeps, path)
        await wait_for(lambda: _has_event(engine, handle.run_id, EventType.WAIT_CREATED))
        assert await engine.client.cancel(handle.run_id) is True
        with pytest.raises(wayline.RunCancelledError):
            await handle.result(timeout=20)
    assert lines(path) == ["do a", "do b", "do c", "undo c", "undo b", "undo a"]
    assert (await handle.status()) is wayline.RunStatus.CANCELLED
    assert await engine.client.cancel(handle.run_id) is False  # already ended


async def test_cancelling_a_pending_run_runs_nothing(engine: Engine, tmp_path: Path) -> None:
    path = str(tmp_path / "log")
    handle = await engine.client.start(peer_counted, path, "x")
    assert await engine.client.cancel(handle.run_id) is True
    async with engine.worker([peer_counted]):
        with pytest.raises(wayline.RunCancelledError):
            await handle.result(timeout=20)
    assert lines(path) == []


async def test_a_cancelled_child_fails_the_parents_wait(engine: Engine, tmp_path: Path) -> None:
    path = str(tmp_path / "log")
    async with engine.worker([peer_parent_of_sleeper, peer_child_sleeps]):
        parent = await engine.client.start(peer_parent_of_sleeper, path)

        async def child_id() -> str | None:
            created = of_type(await parent.events(), EventType.CHILD_CREATED)
            return created[0].data["childRunId"] if created else None

        kid = await wait_for(child_id)
        await wait_for(lambda: _has_event(engine, kid, EventType.WAIT_CREATED))
        await engine.client.cancel(kid)
        assert await parent.result(timeout=20) == "child cancelled"


async def test_parallel_children_gathered(engine: Engine) -> None:
    async with engine.worker([peer_fan_out, peer_square_child]):
        handle = await engine.client.start(peer_fan_out, 6)
        assert await handle.result(timeout=30) == [i * i for i in range(6)]
    kids = await engine.world.list_runs(workflow="peer_square_child")
    assert len(kids) == 6


# --- payloads -----------------------------------------------------------------------------

NASTY: Any = {
    "unicode": "héllo wörld ✓ 𝄞 🙂 中文 עברית \u2028\u2029 \t\n\"'\\",
    "nul": "a\u0000b",
    "nested": {"a": [1, [2, [3, {"b": None}]]], "empty": {}, "list": []},
    "numbers": [0, -1, 2**53 + 1, 2**64, 1.5, -0.25, 1e300],
    "bools": [True, False, None],
    "keys with.dots/and $dollars": {"$wayline": 1, "": "empty key"},
}


async def test_unicode_and_nested_json_round_trip_exactly(engine: Engine) -> None:
    async with engine.worker([peer_echo_flow]):
        handle = await engine.client.start(peer_echo_flow, NASTY)
        out = await handle.result(timeout=20)
    assert out == {"same": True, "value": NASTY}
    info = await engine.client.get_run(handle.run_id)
    assert info.output == {"same": True, "value": NASTY}


async def test_a_payload_over_the_blob_threshold_round_trips(engine: Engine) -> None:
    blob = "é" * (200 * 1024)  # 400 KiB of UTF-8, over the 256 KiB inline limit
    async with engine.worker([peer_big_flow]):
        handle = await engine.client.start(peer_big_flow, blob)
        out = await handle.result(timeout=30)
    assert out["in"] == len(blob)
    assert out["made"] == "y" * (len(blob) * 2)


async def test_a_workflow_that_returns_none(engine: Engine, tmp_path: Path) -> None:
    path = str(tmp_path / "log")
    async with engine.worker([peer_returns_none]):
        handle = await engine.client.start(peer_returns_none, path)
        assert await handle.result(timeout=20) is None
    assert (await handle.status()) is wayline.RunStatus.COMPLETED
    assert lines(path) == ["ran"]


async def test_keyword_only_arguments(engine: Engine) -> None:
    async with engine.worker([peer_kwonly]):
        handle = await engine.client.start(peer_kwonly, 1, c=[1, 2])
        assert await handle.result(timeout=20) == {"a": 1, "b": "dflt", "c": [1, 2]}
        other = await engine.client.start(peer_kwonly, 2, b="given", c=[])
        assert await other.result(timeout=20) == {"a": 2, "b": "given", "c": []}


# --- determinism --------------------------------------------------------------------------


async def test_an_untyped_step_result_is_the_same_inline_and_on_replay(engine: Engine) -> None:
    """The first execution and every replay must see the same value, else the replay
    diverges from what the first execution recorded."""
    token = _tokens()
    async with engine.worker([peer_untyped_tuple]):
        handle = await engine.client.start(peer_untyped_tuple, token)
        await wait_for(lambda: engine.world.get_hook(token))
        await engine.client.resume_hook(token, 1)
        out = await handle.result(timeout=20)
    assert out[0] == out[1]


async def test_random_and_uuid_are_stable_across_replays(engine: Engine) -> None:
    token = _tokens()
    async with engine.worker([peer_random_stable]):
        handle = await engine.client.start(peer_random_stable, token)
        await wait_for(lambda: engine.world.get_hook(token))
        await engine.client.resume_hook(token, 1)
        recorded, replayed = await handle.result(timeout=20)
    assert recorded == replayed


async def _has_event(engine: Engine, run_id: str, kind: EventType) -> bool:
    return bool(of_type(await engine.world.list_events(run_id), kind))


# --- round two ------------------------------------------------------------------------------


@wayline.workflow
async def peer_plain_hook(token: str) -> Any:
    return {"got": await wayline.create_hook(token)}


@pytest.mark.parametrize(
    "token",
    ["order 1/é", "a.b.c", "star*and>gt", "tab\tnewline\n", "emoji🙂", "x" * 300, "pct%2F"],
)
async def test_hook_tokens_with_any_characters(engine: Engine, token: str) -> None:
    async with engine.worker([peer_plain_hook]):
        handle = await engine.client.start(peer_plain_hook, token)
        await wait_for(lambda: engine.world.get_hook(token))
        assert await engine.client.resume_hook(token, [token]) == handle.run_id
        assert await handle.result(timeout=20) == {"got": [token]}


async def test_a_none_payload_is_a_payload(engine: Engine) -> None:
    token = _tokens()
    async with engine.worker([peer_plain_hook]):
        handle = await engine.client.start(peer_plain_hook, token)
        await wait_for(lambda: engine.world.get_hook(token))
        await engine.client.resume_hook(token, None)
        assert await handle.result(timeout=20) == {"got": None}


@wayline.workflow
async def peer_zero_sleeps() -> list[Any]:
    await wayline.sleep(0)
    await wayline.sleep("0s")
    empty = await wayline.gather()
    return ["ok", empty]


async def test_zero_and_negative_sleeps_and_an_empty_gather(engine: Engine) -> None:
    async with engine.worker([peer_zero_sleeps]):
        handle = await engine.client.start(peer_zero_sleeps)
        assert await handle.result(timeout=20) == ["ok", []]


@wayline.step(max_retries=0)
async def peer_returns_set() -> Any:
    return object()


@wayline.workflow
async def peer_bad_step_result() -> str:
    try:
        await peer_returns_set()
    except wayline.StepFailedError as err:
        return f"caught {err.error.get('code')}"
    return "no error"


@wayline.workflow
async def peer_bad_output() -> Any:
    return object()


async def test_unserialisable_results_fail_clearly(engine: Engine) -> None:
    async with engine.worker([peer_bad_step_result, peer_bad_output]):
        step = await engine.client.start(peer_bad_step_result)
        assert await step.result(timeout=20) == "caught SERIALIZATION_ERROR"
        run = await engine.client.start(peer_bad_output)
        with pytest.raises(wayline.RunFailedError, match="SERIALIZATION"):
            await run.result(timeout=20)


async def test_concurrent_starts_with_one_run_id_make_one_run(
    engine: Engine, tmp_path: Path
) -> None:
    path = str(tmp_path / "log")
    run_id = "wf_" + uuid.uuid4().hex
    async with engine.worker([peer_counted]):
        handles = await asyncio.gather(
            *[
                engine.client.start_with(
                    wayline.StartOptions(run_id=run_id), peer_counted, path, "one"
                )
                for _ in range(10)
            ]
        )
        assert {h.run_id for h in handles} == {run_id}
        assert await asyncio.gather(*[h.result(timeout=20) for h in handles]) == ["one"] * 10
    assert lines(path) == ["one"]


async def test_cancel_a_run_waiting_on_a_hook_then_the_hook_is_refused(engine: Engine) -> None:
    token = _tokens()
    async with engine.worker([peer_plain_hook]):
        handle = await engine.client.start(peer_plain_hook, token)
        await wait_for(lambda: engine.world.get_hook(token))
        await engine.client.cancel(handle.run_id)
        with pytest.raises(wayline.RunCancelledError):
            await handle.result(timeout=20)
        with pytest.raises(wayline.HookNotFoundError):
            await engine.client.resume_hook(token, 1)


@wayline.step(max_retries=0)
async def peer_fails_with(kind: str) -> None:
    raise InsufficientFunds(kind)


@wayline.workflow
async def peer_kid_fails_custom(kind: str) -> None:
    await peer_fails_with(kind)


@wayline.workflow
async def peer_parent_reports(kind: str) -> dict[str, Any]:
    try:
        await wayline.child(peer_kid_fails_custom, kind)
    except wayline.ChildFailedError as err:
        return {"status": err.status, "msg": str(err), "error": err.error.get("message")}
    return {}


async def test_a_childs_custom_error_reaches_the_parent(engine: Engine) -> None:
    async with engine.worker([peer_parent_reports, peer_kid_fails_custom]):
        handle = await engine.client.start(peer_parent_reports, "no money")
        out = await handle.result(timeout=20)
    assert out["status"] == "failed"
    assert "no money" in out["msg"] and "InsufficientFunds" in out["msg"]


flip = {"v": False}


@wayline.workflow
async def peer_nondeterministic(path: str, token: str) -> str:
    if flip["v"]:
        await peer_echo("another step")  # the log has peer_mark here
    else:
        await peer_mark(path, "first")
    await wayline.create_hook(token)
    return "done"


async def test_non_deterministic_code_blocks_with_replay_divergence(
    engine: Engine, tmp_path: Path
) -> None:
    path, token = str(tmp_path / "log"), _tokens()
    flip["v"] = False
    try:
        async with engine.worker([peer_nondeterministic]):
            handle = await engine.client.start(peer_nondeterministic, path, token)
            await wait_for(lambda: engine.world.get_hook(token))
        # The code changes between two workers, as a deployment changes it: a worker that kept
        # the run's live replay would feed it the payload without running the code before the
        # hook again (docs/durability.md, "Live replays"); the next worker replays the log.
        flip["v"] = True
        async with engine.worker([peer_nondeterministic]):
            await engine.client.resume_hook(token, 1)

            async def blocked() -> bool:
                return (await handle.status()) is wayline.RunStatus.BLOCKED

            await wait_for(blocked)
            info = await engine.client.get_run(handle.run_id)
            assert info.error is not None and info.error["code"] == "REPLAY_DIVERGENCE"
        flip["v"] = False
        async with engine.worker([peer_nondeterministic]):
            assert await handle.result(timeout=20) == "done"
    finally:
        flip["v"] = False
    assert lines(path) == ["first"]


@wayline.workflow
async def peer_long_history(token: str, n: int) -> int:
    total = 0
    for i in range(n):
        total += await peer_square(i)
    await wayline.create_hook(token)
    for i in range(n):
        total += await peer_square(i)
    return total


async def test_a_long_history_replays(engine: Engine) -> None:
    token, n = _tokens(), 150
    async with engine.worker([peer_long_history]):
        handle = await engine.client.start(peer_long_history, token, n)
        await wait_for(lambda: engine.world.get_hook(token), timeout=30)
        await engine.client.resume_hook(token, 1)
        assert await handle.result(timeout=30) == 2 * sum(i * i for i in range(n))


# --- round three --------------------------------------------------------------------------


async def test_a_hook_resumed_while_no_worker_runs_is_delivered_later(engine: Engine) -> None:
    """Restate/Temporal: a signal sent while every worker is down is kept, in order."""
    token = _tokens()
    worker = wayline.Worker(engine.world, [peer_signals], settings=settings())
    await worker.start()
    handle = await engine.client.start(peer_signals, token, 2)
    await wait_for(lambda: engine.world.get_hook(token))
    await worker.close(graceful=False)
    await engine.client.resume_hook(token, "one")
    await engine.client.resume_hook(token, "two")
    async with engine.worker([peer_signals]):
        assert await handle.result(timeout=20) == ["one", "two"]


@wayline.step(max_retries=0)
async def peer_boom(path: str) -> None:
    mark(path, "boom")
    raise InsufficientFunds("gather member failed")


@wayline.workflow
async def peer_saga_gather(path: str) -> None:
    await peer_do(path, "first")
    await wayline.gather(peer_do(path, "x"), peer_boom(path), peer_do(path, "y"))


async def test_a_failed_gather_member_compensates_what_completed(
    engine: Engine, tmp_path: Path
) -> None:
    path = str(tmp_path / "log")
    async with engine.worker([peer_saga_gather]):
        handle = await engine.client.start(peer_saga_gather, path)
        with pytest.raises(wayline.RunFailedError, match="gather member failed"):
            await handle.result(timeout=20)
    got = lines(path)
    undone = [g for g in got if g.startswith("undo")]
    # every completed forward step is reversed once, in reverse call order (first, x, y)
    assert undone == ["undo y", "undo x", "undo first"], got


@wayline.step(max_retries=5, retry_delay=3600)
async def peer_retry_later(path: str) -> None:
    mark(path, "try")
    raise OSError("down for an hour")


@wayline.workflow
async def peer_waits_for_retry(path: str) -> None:
    await peer_retry_later(path)


async def test_cancel_while_a_step_waits_for_its_retry_ends_promptly(
    engine: Engine, tmp_path: Path
) -> None:
    path = str(tmp_path / "log")
    async with engine.worker([peer_waits_for_retry]):
        handle = await engine.client.start(peer_waits_for_retry, path)
        await wait_for(lambda: _has_event(engine, handle.run_id, EventType.STEP_RETRYING))
        await engine.client.cancel(handle.run_id)
        with pytest.raises(wayline.RunCancelledError):
            await handle.result(timeout=20)
    assert lines(path) == ["try"]


@wayline.step
def peer_sync_step(n: int) -> int:
    return n + 1


@wayline.workflow
async def peer_sync_flow(n: int) -> int:
    return await peer_sync_step(await peer_sync_step(n))


async def test_plain_def_steps(engine: Engine) -> None:
    async with engine.worker([peer_sync_flow]):
        handle = await engine.client.start(peer_sync_flow, 1)
        assert await handle.result(timeout=20) == 3


@wayline.workflow
async def peer_hook_or_sleep(token: str, seconds: float) -> list[Any]:
    index, value = await wayline.race(wayline.create_hook(token), wayline.sleep(seconds))
    return [index, value]


async def test_race_of_a_hook_and_a_sleep(engine: Engine) -> None:
    token = _tokens()
    async with engine.worker([peer_hook_or_sleep]):
        hooked = await engine.client.start(peer_hook_or_sleep, token, 3600.0)
        await wait_for(lambda: engine.world.get_hook(token))
        await engine.client.resume_hook(token, "first")
        assert await hooked.result(timeout=20) == [0, "first"]
        slept = await engine.client.start(peer_hook_or_sleep, _tokens(), 0.2)
        assert await slept.result(timeout=20) == [1, None]


async def test_a_hook_timeout_elapsed_while_no_worker_runs_fires_on_return(
    engine: Engine,
) -> None:
    token = _tokens()
    worker = wayline.Worker(engine.world, [peer_hook_timeout], settings=settings())
    await worker.start()
    handle = await engine.client.start(peer_hook_timeout, token)
    await wait_for(lambda: engine.world.get_hook(token))
    await worker.close(graceful=False)
    await asyncio.sleep(0.4)  # past the 0.2 s timeout
    async with engine.worker([peer_hook_timeout]):
        assert await handle.result(timeout=20) == "timed out"


@wayline.step
async def peer_kw_step(a: int, *, b: int = 2, c: str) -> str:
    return f"{a}-{b}-{c}"


@wayline.workflow
async def peer_kw_parent(token: str) -> list[Any]:
    got = [await peer_kw_step(1, c="x"), await peer_kw_step(3, b=4, c="y")]
    got.append(await wayline.child(peer_kwonly, 7, c=[9]))
    await wayline.create_hook(token)  # the next delivery replays every call above
    got.append(await peer_kw_step(5, c="z"))
    return got


async def test_keyword_arguments_of_steps_and_children_replay(engine: Engine) -> None:
    token = _tokens()
    async with engine.worker([peer_kw_parent, peer_kwonly]):
        handle = await engine.client.start(peer_kw_parent, token)
        await wait_for(lambda: engine.world.get_hook(token))
        await engine.client.resume_hook(token, None)
        assert await handle.result(timeout=20) == [
            "1-2-x",
            "3-4-y",
            {"a": 7, "b": "dflt", "c": [9]},
            "5-2-z",
        ]


LOOKALIKE: Any = {
    "top": {"$wayline.blob": "0" * 64, "bytes": 3},
    "list": [{"$wayline.blob": "not a hash", "bytes": -1}],
}


@wayline.workflow
async def peer_lookalike(value: Any, token: str) -> Any:
    echoed = await peer_echo(value)
    payload = await wayline.create_hook(token)
    return {"input": value, "step": echoed, "hook": payload}


async def test_values_that_look_like_blob_references_round_trip(engine: Engine) -> None:
    token = _tokens()
    async with engine.worker([peer_lookalike]):
        handle = await engine.client.start(peer_lookalike, LOOKALIKE, token)
        await wait_for(lambda: engine.world.get_hook(token))
        await engine.client.resume_hook(token, LOOKALIKE)
        out = await handle.result(timeout=20)
    assert out == {"input": LOOKALIKE, "step": LOOKALIKE, "hook": LOOKALIKE}
    assert (await engine.client.get_run(handle.run_id)).input == {"args": [LOOKALIKE, token]}


async def test_several_large_values_in_one_run(engine: Engine) -> None:
    big = "z" * (300 * 1024)
    token = _tokens()
    async with engine.worker([peer_lookalike]):
        handle = await engine.client.start(peer_lookalike, [big, big + "!"], token)
        await wait_for(lambda: engine.world.get_hook(token))
        await engine.client.resume_hook(token, {"big": big * 2})
        out = await handle.result(timeout=30)
    assert out == {"input": [big, big + "!"], "step": [big, big + "!"], "hook": {"big": big * 2}}


@wayline.workflow
async def peer_future_reuse(path: str) -> list[Any]:
    once = peer_mark(path, "shared")
    first = await once
    second = await once
    peer_mark(path, "never awaited")  # started but not awaited: the run still ends
    return [first, second]


async def test_a_step_future_awaited_twice_and_one_never_awaited(
    engine: Engine, tmp_path: Path
) -> None:
    path = str(tmp_path / "log")
    async with engine.worker([peer_future_reuse]):
        handle = await engine.client.start(peer_future_reuse, path)
        assert await handle.result(timeout=20) == ["shared", "shared"]
    assert lines(path).count("shared") == 1


@wayline.workflow
async def peer_catch_in_gather(path: str) -> list[Any]:
    slow = peer_do(path, "slow")
    try:
        await wayline.gather(peer_boom(path), slow)
    except wayline.StepFailedError:
        pass
    return [await slow, "recovered"]


async def test_a_gather_failure_caught_and_the_sibling_still_awaited(
    engine: Engine, tmp_path: Path
) -> None:
    path = str(tmp_path / "log")
    async with engine.worker([peer_catch_in_gather]):
        handle = await engine.client.start(peer_catch_in_gather, path)
        assert await handle.result(timeout=20) == ["slow", "recovered"]
    assert sorted(lines(path)) == ["boom", "do slow"]


@wayline.workflow
async def peer_everything_skipped(token: str) -> list[Any]:
    a = await wayline.child(peer_square_child, 3)
    try:
        await wayline.create_hook(token, timeout="2d")
    except wayline.HookTimeout:
        b = "hook timed out"
    await wayline.sleep("7d")
    return [a, b]


async def test_time_skipping_over_a_child_a_hook_timeout_and_a_sleep() -> None:
    async with wayline.testing.Environment([peer_everything_skipped, peer_square_child]) as env:
        handle = await env.client.start(peer_everything_skipped, _tokens())
        assert await handle.result(timeout=20) == [9, "hook timed out"]
        assert env.skipped >= 9 * 86400 - 60


async def test_the_errors_a_client_raises_are_public(engine: Engine) -> None:
    """``handle.result(timeout=...)`` and ``get_run`` raise errors a user can name."""
    missing = "wf_" + "0" * 32
    with pytest.raises(wayline.RunNotFoundError):
        await engine.client.get_run(missing)
    handle = await engine.client.start(peer_counted, "/dev/null", "x")  # no worker: pending
    with pytest.raises(wayline.ResultTimeoutError, match="pending"):
        await handle.result(timeout=0.1)
