"""Hooks, patches, children, queued retries and typed values: more scenarios from other durable
engines' own test suites (Temporal's Python SDK ``tests/worker/test_workflow.py`` and contrib
converters, DBOS Transact's ``test_dbos.py``, ``test_failures.py`` and ``test_queue.py``, Restate's
SDK tests, Inngest), ported to Wayline as black-box tests on every world. Each docstring names the
test it ports. None repeats a scenario of ``test_peer_scenarios.py``."""

from __future__ import annotations

import asyncio
import dataclasses
import enum
import uuid
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import pydantic
import pytest

import wayline
from tests.runtime.flows import lines, mark
from tests.runtime.harness import Engine, of_type, settings, wait_for
from wayline._core.events import EventType

pytestmark = pytest.mark.partitioned  # docs/nats.md, "Partitions"


def _token() -> str:
    return f"p2-{uuid.uuid4().hex[:12]}"


async def _has_event(engine: Engine, run_id: str, kind: EventType) -> bool:
    return bool(of_type(await engine.world.list_events(run_id), kind))


# --- shared steps ------------------------------------------------------------------------------


@wayline.step(max_retries=0)
async def p2_mark(path: str, label: str) -> str:
    mark(path, label)
    return label


@wayline.step
async def p2_echo(value: Any) -> Any:
    return value


@wayline.step
async def p2_square(n: int) -> int:
    return n * n


# --- typed values (Temporal contrib/pydantic test_pydantic, test_workflow_dataclass) ----------


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


@dataclasses.dataclass
class Money:
    cents: int
    currency: str


class Order(pydantic.BaseModel):
    id: uuid.UUID
    at: datetime
    total: Decimal
    color: Color
    tags: set[str]
    money: Money


ORDER = Order(
    id=uuid.UUID("12345678-1234-5678-1234-567812345678"),
    at=datetime(2024, 2, 29, 23, 59, 58, 123456, tzinfo=UTC),
    total=Decimal("10.10"),
    color=Color.BLUE,
    tags={"a", "b"},
    money=Money(1010, "EUR"),
)


def _kinds(order: Order) -> list[str]:
    return [
        type(order).__name__,
        type(order.id).__name__,
        type(order.at).__name__,
        type(order.total).__name__,
        type(order.color).__name__,
        type(order.tags).__name__,
        type(order.money).__name__,
    ]


@wayline.step
async def p2_bump(order: Order) -> Order:
    assert isinstance(order, Order) and isinstance(order.money, Money)
    return order.model_copy(update={"total": order.total + Decimal("0.01")})


@wayline.workflow
async def p2_money_child(money: Money) -> Money:
    return Money(money.cents * 2, money.currency)


@wayline.workflow
async def p2_typed(order: Order, token: str) -> dict[str, Any]:
    bumped = await p2_bump(order)
    doubled = await wayline.child(p2_money_child, bumped.money)
    seen = [*_kinds(order), *_kinds(bumped), type(doubled).__name__]
    first = await p2_echo(seen)  # what the first execution saw is recorded in the log
    paid = await wayline.create_hook(token, type=Money)
    return {
        "first": first,
        "replayed": seen,
        "hook": type(paid).__name__,
        "total": str(bumped.total),
        "doubled": doubled.cents,
        "same_input": order == ORDER,
    }


@wayline.workflow
async def p2_typed_identity(order: Order) -> Order:
    return await p2_bump(order)


async def test_typed_values_are_rebuilt_inline_on_replay_and_through_a_child(
    engine: Engine,
) -> None:
    """Temporal ``tests/contrib/pydantic/test_pydantic.py::test_pydantic_model_usage_in_workflow``
    and ``test_workflow.py::test_workflow_dataclass``: datetime, UUID, Decimal, Enum, set and a
    nested dataclass cross every boundary (input, step argument and result, child argument and
    result, hook payload, run output) as their own types, the same inline and on replay."""
    token = _token()
    kinds = ["Order", "UUID", "datetime", "Decimal", "Color", "set", "Money"]
    async with engine.worker([p2_typed, p2_money_child, p2_typed_identity]):
        handle = await engine.client.start(p2_typed, ORDER, token)
        await wait_for(lambda: engine.world.get_hook(token))
        await engine.client.resume_hook(token, {"cents": 5, "currency": "EUR"})
        out = await handle.result(timeout=20)
        same = await engine.client.start(p2_typed_identity, ORDER)
        back = await same.result(timeout=20)
    assert out["first"] == out["replayed"] == [*kinds, *kinds, "Money"]
    assert out["hook"] == "Money"
    assert (out["total"], out["doubled"], out["same_input"]) == ("10.11", 2020, True)
    assert back == ORDER.model_copy(update={"total": Decimal("10.11")})
    assert isinstance(back.at, datetime) and back.at.tzinfo is not None


# --- versioning (Temporal test_workflow_patch_memoized) ----------------------------------------


@wayline.step
async def p2_note(path: str, what: str) -> str:
    mark(path, what)
    return what


@wayline.workflow(name="p2_patched_twice")
async def p2_patched_v1(path: str, token: str) -> str:
    await p2_note(path, "a")
    first = await wayline.create_hook(token)
    return f"v1:{first}"


@wayline.workflow(name="p2_patched_twice")
async def p2_patched_v2(path: str, token: str) -> str:
    await p2_note(path, "a")
    answers = [wayline.patched("p")]  # inside the old history: False
    first = await wayline.create_hook(token)
    answers.append(wayline.patched("p"))  # past the history, but the first answer holds
    if answers[-1]:
        await p2_note(path, "patched")
    return f"v2:{first}:{answers}"


async def test_a_patch_answered_false_stays_false_for_the_rest_of_the_run(
    engine: Engine, tmp_path: Path
) -> None:
    """Temporal ``test_workflow.py::test_workflow_patch_memoized``: the answer to ``patched``
    for one id is memoized for the run; a new run takes the patch at both calls."""
    old_path, new_path = str(tmp_path / "old"), str(tmp_path / "new")
    old_token, new_token = _token(), _token()
    async with engine.worker([p2_patched_v1]):
        old = await engine.client.start(p2_patched_v1, old_path, old_token)
        await wait_for(lambda: engine.world.get_hook(old_token))
    async with engine.worker([p2_patched_v2]):
        await engine.client.resume_hook(old_token, "x")
        assert await old.result(timeout=20) == "v2:x:[False, False]"
        new = await engine.client.start(p2_patched_v2, new_path, new_token)
        await wait_for(lambda: engine.world.get_hook(new_token))
        await engine.client.resume_hook(new_token, "y")
        assert await new.result(timeout=20) == "v2:y:[True, True]"
    assert lines(old_path) == ["a"]
    assert lines(new_path) == ["a", "patched"]


# --- hooks and timeouts ------------------------------------------------------------------------


@wayline.workflow
async def p2_timeout_then_other(t1: str, t2: str) -> list[Any]:
    try:
        first = await wayline.create_hook(t1, timeout=0.2)
    except wayline.HookTimeout:
        first = "timeout"
    return [first, await wayline.create_hook(t2)]


async def test_a_payload_sent_after_the_hook_timed_out_is_refused(engine: Engine) -> None:
    """Inngest ``waitForEvent`` with ``timeout`` (an event sent after the wait timed out is not
    that wait's) and Temporal ``wait_condition(timeout=)``: once the workflow saw the timeout,
    a resume of that token must be refused, not reported delivered and dropped."""
    t1, t2 = _token(), _token()
    async with engine.worker([p2_timeout_then_other]):
        handle = await engine.client.start(p2_timeout_then_other, t1, t2)
        await wait_for(lambda: engine.world.get_hook(t2))
        with pytest.raises(wayline.HookNotFoundError):
            await engine.client.resume_hook(t1, "too late")
        assert [h["token"] for h in await engine.client.open_hooks(handle.run_id)] == [t2]
        await engine.client.resume_hook(t2, "ok")
        assert await handle.result(timeout=20) == ["timeout", "ok"]


async def test_a_hook_timed_out_by_wake_up_frees_its_token_too(engine: Engine) -> None:
    """The same through ``Client.wake_up(run, "h1.timeout")`` (a time-skipping test's way):
    the timeout recorded by the client, the disposal by the worker that replays it, and the
    log holds one disposal, right after the timeout."""
    t1, t2 = _token(), _token()
    async with engine.worker([p2_timeout_later_then_other]):
        handle = await engine.client.start(p2_timeout_later_then_other, t1, t2)
        await wait_for(lambda: engine.world.get_hook(t1))
        assert await engine.client.wake_up(handle.run_id, "h1.timeout") == ["h1.timeout"]
        await wait_for(lambda: engine.world.get_hook(t2))
        with pytest.raises(wayline.HookNotFoundError):
            await engine.client.resume_hook(t1, "too late")
        await engine.client.resume_hook(t2, "ok")
        assert await handle.result(timeout=20) == ["timeout", "ok"]
    kinds = [(e.type, e.correlation_id) for e in await handle.events()]
    assert kinds.count((EventType.HOOK_DISPOSED, "h1")) == 1
    at = kinds.index((EventType.WAIT_COMPLETED, "h1.timeout"))
    assert kinds[at + 1] == (EventType.HOOK_DISPOSED, "h1"), kinds


@wayline.workflow
async def p2_timeout_later_then_other(t1: str, t2: str) -> list[Any]:
    try:
        first = await wayline.create_hook(t1, timeout=3600)
    except wayline.HookTimeout:
        first = "timeout"
    return [first, await wayline.create_hook(t2)]


async def test_a_timed_out_hook_is_disposed_in_the_write_of_its_timeout(engine: Engine) -> None:
    """No payload can slip in between a hook's timeout and its disposal: both are one write."""
    t1, t2 = _token(), _token()
    async with engine.worker([p2_timeout_then_other]):
        handle = await engine.client.start(p2_timeout_then_other, t1, t2)
        await wait_for(lambda: engine.world.get_hook(t2))
        events = await handle.events()
    timed_out = next(e for e in events if e.type is EventType.WAIT_COMPLETED)
    disposed = next(e for e in events if e.type is EventType.HOOK_DISPOSED)
    assert (disposed.correlation_id, disposed.seq) == ("h1", timed_out.seq + 1)
    assert disposed.created_at == timed_out.created_at  # one append: one stamp


@wayline.workflow
async def p2_recv_then_answer(token: str) -> list[Any]:
    got: list[Any] = []
    try:
        got.append(await wayline.create_hook(token, timeout=0.3))
    except wayline.HookTimeout:
        got.append("timeout")
    got.append(await wayline.create_hook(token, timeout=3600))
    return got


async def test_a_second_wait_on_a_timed_out_token_receives_its_payload(engine: Engine) -> None:
    """Inngest ``waitForEvent`` timeout, then a second ``waitForEvent`` on the same event name
    that is answered (and DBOS ``recv`` after a timed-out ``recv``)."""
    token = _token()
    async with engine.worker([p2_recv_then_answer]):
        handle = await engine.client.start(p2_recv_then_answer, token)

        async def second_hook() -> bool:
            hooks = of_type(await handle.events(), EventType.HOOK_CREATED)
            return len(hooks) == 2 or (await handle.status()).terminal

        await wait_for(second_hook)
        await engine.client.resume_hook(token, {"late": True})
        assert await handle.result(timeout=20) == ["timeout", {"late": True}]


@wayline.workflow
async def p2_combinators(t1: str, t2: str, t3: str, path: str) -> list[Any]:
    index, value = await wayline.race(
        wayline.gather(p2_square(2), p2_square(3)), wayline.create_hook(t1)
    )
    await wayline.create_hook(t2)  # the next delivery replays the race
    first = await wayline.any(p2_fail_once_more(path), wayline.create_hook(t3))
    return [index, value, first]


@wayline.step(max_retries=0)
async def p2_fail_once_more(path: str) -> str:
    mark(path, "failed")
    raise ValueError("never succeeds")


async def test_nested_combinators_settle_the_same_way_on_replay(
    engine: Engine, tmp_path: Path
) -> None:
    """Restate SDK ``RestateDurableFuture`` combinators (``any``/``all`` over steps and
    awakeables) and Temporal ``workflow.wait(FIRST_COMPLETED)``: a gather nested in a race
    wins over a hook, a late payload to the losing hook changes nothing, and ``any`` passes over
    a failure to a hook's payload."""
    t1, t2, t3, path = _token(), _token(), _token(), str(tmp_path / "log")
    async with engine.worker([p2_combinators]):
        handle = await engine.client.start(p2_combinators, t1, t2, t3, path)
        await wait_for(lambda: engine.world.get_hook(t2))
        await engine.client.resume_hook(t1, "too late")  # the loser still holds its token
        await engine.client.resume_hook(t2, None)
        await wait_for(lambda: engine.world.get_hook(t3))
        await engine.client.resume_hook(t3, "hooked")
        assert await handle.result(timeout=20) == [0, [4, 9], "hooked"]
    assert lines(path) == ["failed"]


@wayline.workflow
async def p2_with_metadata(token: str) -> Any:
    return await wayline.create_hook(token, metadata={"order": "o-1", "amount": 12})


async def test_a_waiting_hook_is_listed_with_its_metadata(engine: Engine) -> None:
    """Temporal ``test_workflow_memo``/``test_workflow_query`` style inspection of a waiting
    workflow: ``open_hooks`` lists the token, its metadata and that it waits; an ended run's
    hook is gone."""
    token = _token()
    async with engine.worker([p2_with_metadata]):
        handle = await engine.client.start(p2_with_metadata, token)
        await wait_for(lambda: engine.world.get_hook(token))
        [hook] = await engine.client.open_hooks(handle.run_id)
        assert (hook["token"], hook["status"], hook["runId"]) == (token, "waiting", handle.run_id)
        assert hook["metadata"] == {"order": "o-1", "amount": 12}
        assert hook["workflow"] == "p2_with_metadata"
        await engine.client.resume_hook(token, 1)
        assert await handle.result(timeout=20) == 1
    assert [h for h in await engine.client.open_hooks() if h["token"] == token] == []


# --- retries and errors ------------------------------------------------------------------------


@wayline.step(max_retries=5, retry_delay=0.01)
async def p2_fatal(path: str) -> None:
    mark(path, "try")
    raise wayline.FatalError("card declined for good")


@wayline.workflow
async def p2_catches_fatal(path: str) -> dict[str, Any]:
    try:
        await p2_fatal(path)
    except wayline.StepFailedError as err:
        return {"msg": str(err), "attempts": lines(path).count("try")}
    return {}


async def test_a_fatal_error_is_not_retried(engine: Engine, tmp_path: Path) -> None:
    """Inngest ``NonRetriableError`` / Temporal ``ApplicationError(non_retryable=True)``
    (``test_workflow.py::test_workflow_activity_non_retryable_error``): one attempt, however
    many retries the step allows."""
    path = str(tmp_path / "log")
    async with engine.worker([p2_catches_fatal]):
        handle = await engine.client.start(p2_catches_fatal, path)
        out = await handle.result(timeout=20)
    assert lines(path) == ["try"]
    assert "card declined for good" in out["msg"]
    assert of_type(await handle.events(), EventType.STEP_RETRYING) == []


@wayline.step(
    timeout="5s",
    retry=wayline.RetryPolicy(max_attempts=3, initial=0.01, backoff=2.0),
)
async def p2_queued_flaky(path: str) -> str:
    attempt = wayline.step_context().attempt
    mark(path, f"attempt {attempt}")
    raise OSError(f"flaky {attempt}")


@wayline.workflow
async def p2_queued_retries(path: str) -> str:
    try:
        await p2_queued_flaky(path)
    except wayline.StepFailedError as err:
        return f"gave up: {err.error.get('message')}"
    return "no error"


async def test_a_queued_steps_retry_policy_counts_every_attempt(
    engine: Engine, tmp_path: Path
) -> None:
    """DBOS ``test_dbos.py::test_step_retries`` (``max_attempts`` with ``backoff_rate``, also
    for an enqueued step): exactly ``max_attempts`` bodies, then the error reaches the
    workflow. The step has ``timeout=``, so it runs as its own queued delivery."""
    path = str(tmp_path / "log")
    async with engine.worker([p2_queued_retries]):
        handle = await engine.client.start(p2_queued_retries, path)
        out = await handle.result(timeout=20)
    assert out.startswith("gave up: flaky 3"), out
    assert lines(path) == ["attempt 1", "attempt 2", "attempt 3"]
    delays = [e.data["delay"] for e in of_type(await handle.events(), EventType.STEP_RETRYING)]
    assert len(delays) == 2 and delays[1] > delays[0]


@wayline.step(timeout="1s", max_retries=0)
async def p2_too_slow(path: str) -> str:
    mark(path, "slow start")
    await asyncio.sleep(30)
    return "never"


@wayline.workflow
async def p2_catches_timeout(path: str) -> dict[str, Any]:
    try:
        await p2_too_slow(path)
    except wayline.StepFailedError as err:
        caught = {"code": err.error.get("code")}
    caught["next"] = await p2_mark(path, "next")
    return caught


async def test_a_step_past_its_timeout_fails_and_the_workflow_catches_it(
    engine: Engine, tmp_path: Path
) -> None:
    """Temporal ``test_workflow.py::test_workflow_activity_timeout`` (start-to-close, no
    retries): the activity error reaches the workflow, which goes on."""
    path = str(tmp_path / "log")
    async with engine.worker([p2_catches_timeout]):
        handle = await engine.client.start(p2_catches_timeout, path)
        out = await handle.result(timeout=30)
    assert out == {"code": "INVOCATION_FENCED", "next": "next"}
    assert lines(path) == ["slow start", "next"]


# --- starting: workflow ids ---------------------------------------------------------------------


@wayline.workflow
async def p2_other(path: str, tag: str) -> str:
    return await p2_mark(path, f"other {tag}")


@wayline.workflow
async def p2_one(path: str, tag: str) -> str:
    return await p2_mark(path, tag)


async def test_a_run_id_reused_for_another_workflow_is_refused(
    engine: Engine, tmp_path: Path
) -> None:
    """DBOS ``test_dbos.py::test_workflow_id_conflict`` (``DBOSConflictingWorkflowError`` for
    the same id under another function) and the same id with other arguments, which returns
    the first run (``test_idempotency``)."""
    path, run_id = str(tmp_path / "log"), "wf_" + uuid.uuid4().hex
    async with engine.worker([p2_one, p2_other]):
        first = await engine.client.start_with(
            wayline.StartOptions(run_id=run_id), p2_one, path, "first"
        )
        assert await first.result(timeout=20) == "first"
        with pytest.raises(wayline.WaylineError, match="p2_one"):
            await engine.client.start_with(wayline.StartOptions(run_id=run_id), p2_other, path, "x")
        again = await engine.client.start_with(
            wayline.StartOptions(run_id=run_id), p2_one, path, "second"
        )
        assert await again.result(timeout=20) == "first"
        await asyncio.sleep(0.1)
    assert lines(path) == ["first"]


# --- children ------------------------------------------------------------------------------------


@wayline.workflow
async def p2_info_child(tag: str) -> dict[str, Any]:
    info = wayline.workflow_info()
    return {"name": info.workflow_name, "parent": info.parent_run_id, "run": info.run_id}


@wayline.workflow
async def p2_info_parent() -> dict[str, Any]:
    me = wayline.workflow_info()
    kid = await wayline.child(p2_info_child, "k")
    return {"me": me.run_id, "parent": me.parent_run_id, "kid": kid}


async def test_workflow_info_names_the_parent_of_a_child(engine: Engine) -> None:
    """Temporal ``test_workflow.py::test_workflow_info`` (``workflow.info().parent``)."""
    async with engine.worker([p2_info_parent, p2_info_child]):
        handle = await engine.client.start(p2_info_parent)
        out = await handle.result(timeout=20)
    [created] = of_type(await handle.events(), EventType.CHILD_CREATED)
    assert out["me"] == handle.run_id and out["parent"] is None
    assert out["kid"] == {
        "name": "p2_info_child",
        "parent": handle.run_id,
        "run": created.data["childRunId"],
    }


@wayline.workflow
async def p2_sleepy_child(seconds: float) -> str:
    await wayline.sleep(seconds)
    return "child woke"


@wayline.workflow
async def p2_parent_of_sleepy() -> dict[str, Any]:
    try:
        return {"ok": await wayline.child(p2_sleepy_child, 3600.0)}
    except wayline.ChildFailedError as err:
        return {"status": err.status, "code": err.error.get("code")}


async def _child_of(handle: wayline.RunHandle[Any]) -> Any:
    created = of_type(await handle.events(), EventType.CHILD_CREATED)
    return created[0].data["childRunId"] if created else None


@pytest.mark.parametrize("how", ["terminate", "fail"])
async def test_a_child_ended_from_outside_reports_to_its_waiting_parent(
    engine: Engine, how: str
) -> None:
    """Temporal ``test_workflow.py::test_workflow_child_workflow_terminated``-style (a child
    terminated by a client fails the parent's ``execute_child_workflow`` with the
    termination), with a real worker driving both runs."""
    async with engine.worker([p2_parent_of_sleepy, p2_sleepy_child]):
        parent = await engine.client.start(p2_parent_of_sleepy)
        kid = await wait_for(lambda: _child_of(parent))
        await wait_for(lambda: _has_event(engine, kid, EventType.WAIT_CREATED))
        if how == "terminate":
            assert await engine.client.terminate(kid, "ops said so") is True
            expected = {"status": "cancelled", "code": "RUN_CANCELLED"}
        else:
            assert await engine.client.fail(kid, "ops said so") is True
            expected = {"status": "failed", "code": "TERMINATED"}
        assert await parent.result(timeout=20) == expected


@wayline.workflow
async def p2_queued_parent(n: int) -> int:
    return await wayline.child(p2_square_child, n)


@wayline.workflow
async def p2_square_child(n: int) -> int:
    return await p2_square(n)


async def test_a_child_of_a_queued_run_is_served_by_the_queues_workers(engine: Engine) -> None:
    """Temporal ``test_workflow.py::test_workflow_child_workflow`` on a task queue: a child's
    task queue defaults to its parent's, so the deployment that serves the queue runs the
    child too (DBOS: a child of an enqueued workflow runs on the same executor)."""
    async with engine.worker([p2_queued_parent, p2_square_child], queue="p2-q"):
        handle = await engine.client.start_with(
            wayline.StartOptions(queue="p2-q"), p2_queued_parent, 7
        )
        assert await handle.result(timeout=10) == 49


@wayline.step(max_retries=2, retry_delay=0.01)  # a killed attempt counts as one
async def p2_child_step(path: str, label: str) -> str:
    first = label not in lines(path)
    mark(path, label)
    if first:
        await asyncio.sleep(60)  # the worker is killed under it
    return label


@wayline.workflow
async def p2_crash_child(path: str) -> str:
    return await p2_child_step(path, "child body")


@wayline.workflow
async def p2_crash_parent(path: str) -> list[str]:
    before = await p2_mark(path, "parent before")
    kid = await wayline.child(p2_crash_child, path)
    after = await p2_mark(path, "parent after")
    return [before, kid, after]


async def test_a_worker_killed_inside_a_childs_step_recovers_parent_and_child(
    engine: Engine, tmp_path: Path
) -> None:
    """DBOS ``test_failures.py::test_recovery_during_child`` / ``test_dbos.py``
    child-workflow recovery: the parent's completed step does not run again, the child's
    interrupted step does, and both runs complete."""
    path = str(tmp_path / "log")
    worker = wayline.Worker(engine.world, [p2_crash_parent, p2_crash_child], settings=settings())
    await worker.start()
    handle = await engine.client.start(p2_crash_parent, path)
    await wait_for(_marked(path, "child body"))
    await worker.close(graceful=False)
    async with engine.worker([p2_crash_parent, p2_crash_child]):
        assert await handle.result(timeout=30) == ["parent before", "child body", "parent after"]
    got = lines(path)
    assert got.count("parent before") == 1 and got.count("parent after") == 1
    assert got.count("child body") == 2  # at least once: the killed attempt and its retry


def _marked(path: str, label: str) -> Any:
    async def check() -> bool:
        return label in lines(path)

    return check


# --- compensation ---------------------------------------------------------------------------------


async def _slow_undo(path: str, label: str) -> None:
    mark(path, f"undo {label} start")
    await asyncio.sleep(0.3)
    mark(path, f"undo {label}")


@wayline.step(max_retries=0, compensate=_slow_undo)
async def p2_do(path: str, label: str) -> str:
    mark(path, f"do {label}")
    return label


@wayline.step(max_retries=0)
async def p2_boom(path: str) -> None:
    mark(path, "boom")
    raise ValueError("third step failed")


@wayline.workflow
async def p2_saga_fails(path: str) -> None:
    await p2_do(path, "a")
    await p2_do(path, "b")
    await p2_boom(path)


async def test_a_cancel_during_the_unwind_of_a_failure_compensates_each_step_once(
    engine: Engine, tmp_path: Path
) -> None:
    """DBOS ``test_workflow_cancel.py`` / Temporal saga samples: a cancel that arrives while a
    failed run already compensates neither restarts nor repeats the reversals."""
    path = str(tmp_path / "log")
    async with engine.worker([p2_saga_fails]):
        handle = await engine.client.start(p2_saga_fails, path)
        await wait_for(_marked(path, "undo b start"))
        await engine.client.cancel(handle.run_id)
        with pytest.raises((wayline.RunFailedError, wayline.RunCancelledError)):
            await handle.result(timeout=20)
        await asyncio.sleep(0.3)
    got = lines(path)
    assert got == ["do a", "do b", "boom", "undo b start", "undo b", "undo a start", "undo a"]


def _undo_with_result(path: str, label: str) -> None:
    ctx = wayline.step_context()
    mark(path, f"undo {label} of {ctx.forward_result} ({ctx.forward_idempotency_key})")


@wayline.step(max_retries=3, retry_delay=0.01, compensate=_undo_with_result)
async def p2_charge(path: str, label: str) -> str:
    attempt = wayline.step_context().attempt
    mark(path, f"charge {label} attempt {attempt}")
    if attempt < 3:
        raise OSError("gateway timeout")
    return f"receipt-{label}-{attempt}"


@wayline.workflow
async def p2_saga_retried(path: str) -> None:
    await p2_charge(path, "x")
    await p2_boom(path)


async def test_a_compensation_sees_the_result_of_the_retried_forward_step(
    engine: Engine, tmp_path: Path
) -> None:
    """Temporal saga sample (``samples-python/saga``) and DBOS step retries: the reversal of a
    step that succeeded on its third attempt is given that attempt's result, under the
    forward step's key."""
    path = str(tmp_path / "log")
    async with engine.worker([p2_saga_retried]):
        handle = await engine.client.start(p2_saga_retried, path)
        with pytest.raises(wayline.RunFailedError, match="third step failed"):
            await handle.result(timeout=20)
    got = lines(path)
    key = f"{handle.run_id}:"
    assert got[:4] == [
        "charge x attempt 1",
        "charge x attempt 2",
        "charge x attempt 3",
        "boom",
    ]
    assert len(got) == 5 and got[4].startswith("undo x of receipt-x-3 (" + key)
    assert got[4].endswith(":forward)")


# --- concurrency (DBOS queues) -------------------------------------------------------------


@wayline.step(concurrency=wayline.Limit(max=1, lease="30s"))
async def p2_exclusive(path: str, tag: str) -> str:
    mark(path, f"start {tag}")
    await asyncio.sleep(0.1)
    mark(path, f"end {tag}")
    return tag


@wayline.workflow
async def p2_fan_exclusive(path: str, n: int) -> list[str]:
    return await wayline.gather(*[p2_exclusive(path, f"t{i}") for i in range(n)])


def _most_at_once(path: str) -> int:
    live, most = 0, 0
    for line in lines(path):
        live += 1 if line.startswith("start") else -1
        most = max(most, live)
    return most


async def test_a_gather_of_a_step_limited_to_one_runs_its_bodies_one_at_a_time(
    engine: Engine, tmp_path: Path
) -> None:
    """DBOS ``test_queue.py::test_queue_concurrency`` (``Queue(concurrency=1)``, steps enqueued
    from one workflow): every member completes, in argument order, never two bodies at once."""
    path = str(tmp_path / "log")
    async with engine.worker([p2_fan_exclusive], settings=settings()):
        handle = await engine.client.start(p2_fan_exclusive, path, 4)
        assert await handle.result(timeout=40) == ["t0", "t1", "t2", "t3"]
    assert _most_at_once(path) == 1
    assert sorted(lines(path)) == sorted(
        [f"start t{i}" for i in range(4)] + [f"end t{i}" for i in range(4)]
    )


@wayline.workflow(concurrency=wayline.Limit(key=lambda path, who: who, max=1))
async def p2_per_customer(path: str, who: str) -> str:
    await p2_mark(path, f"start {who}")
    await wayline.sleep(0.2)
    await p2_mark(path, f"end {who}")
    return who


async def test_a_workflow_limit_per_key_lets_other_keys_run(engine: Engine, tmp_path: Path) -> None:
    """DBOS ``test_queue.py::test_queue_partitions`` (a partitioned queue with concurrency 1 per
    partition key) / Hatchet concurrency keys: one live run per key, keys independent."""
    path = str(tmp_path / "log")
    async with engine.worker([p2_per_customer]):
        ana = [await engine.client.start(p2_per_customer, path, "ana") for _ in range(2)]
        bob = await engine.client.start(p2_per_customer, path, "bob")
        assert await bob.result(timeout=20) == "bob"
        assert [await h.result(timeout=20) for h in ana] == ["ana", "ana"]
    ana_lines = [line for line in lines(path) if line.endswith("ana")]
    assert ana_lines == ["start ana", "end ana", "start ana", "end ana"]


# --- time ---------------------------------------------------------------------------------------


async def test_wake_up_fires_a_childs_sleep_and_the_parent_gets_its_result(
    engine: Engine,
) -> None:
    """Restate/Temporal time-skipping tests driven per run: waking the child's hour-long
    sleep ends the child, whose result reaches the parent."""
    async with engine.worker([p2_parent_of_sleepy, p2_sleepy_child]):
        parent = await engine.client.start(p2_parent_of_sleepy)
        kid = await wait_for(lambda: _child_of(parent))
        await wait_for(lambda: _has_event(engine, kid, EventType.WAIT_CREATED))
        assert await engine.client.wake_up(kid) == ["w1"]
        assert await parent.result(timeout=20) == {"ok": "child woke"}


# --- data conversion at the edges (Temporal converter tests) -----------------------------------


@wayline.step
async def p2_loose_int(n: int) -> int:
    return str(n)  # type: ignore[return-value]  # a body that returns the wrong type


@wayline.step
async def p2_loose_money(cents: int) -> Money:
    return {"cents": cents, "currency": "EUR"}  # type: ignore[return-value]


@wayline.workflow
async def p2_loose(token: str) -> list[Any]:
    n = await p2_loose_int(12)
    money = await p2_loose_money(5)
    seen = [type(n).__name__, type(money).__name__]
    first = await p2_echo(seen)
    await wayline.create_hook(token)
    return [first, seen]


async def test_a_step_result_is_converted_to_its_annotation_inline_as_on_replay(
    engine: Engine,
) -> None:
    """Temporal ``test_workflow.py::test_workflow_activity_type_hints`` / pydantic converter:
    the workflow sees a step's result as its annotated type, the same on the first execution
    as on every replay (else the replay disagrees with what the first execution did)."""
    token = _token()
    async with engine.worker([p2_loose]):
        handle = await engine.client.start(p2_loose, token)
        await wait_for(lambda: engine.world.get_hook(token))
        await engine.client.resume_hook(token, None)
        first, replayed = await handle.result(timeout=20)
    assert first == replayed


async def test_a_start_with_an_input_that_does_not_match_is_refused_or_fails_clearly(
    engine: Engine,
) -> None:
    """Temporal converter tests (a payload the workflow's type hints reject): a bad input
    never hangs the run; it is refused at start or fails the run naming the field."""
    bad = {**ORDER.model_dump(mode="json"), "id": "not-a-uuid"}
    async with engine.worker([p2_typed_identity]):
        try:
            handle = await engine.client.start(p2_typed_identity, bad)  # type: ignore[arg-type]
        except wayline.SerializationError as err:
            assert "id" in str(err)
            return
        with pytest.raises(wayline.RunFailedError) as caught:
            await handle.result(timeout=20)
    assert "id" in str(caught.value) and "SERIALIZATION" in str(caught.value)


@wayline.step(max_retries=0, compensate=_slow_undo)
async def p2_slow_do(path: str, label: str) -> str:
    mark(path, f"do {label} start")
    # the test's terminate must land while this runs: 0.5 s is a narrow window on a loaded
    # machine (the step would end, and "after" run, before the terminate is written)
    await asyncio.sleep(2.0)
    mark(path, f"do {label}")
    return label


@wayline.workflow
async def p2_terminated_mid_step(path: str) -> str:
    await p2_do(path, "a")
    await p2_slow_do(path, "b")
    return await p2_mark(path, "after")


async def test_terminate_during_a_running_step_ends_the_run_without_compensations(
    engine: Engine, tmp_path: Path
) -> None:
    """Temporal ``test_client.py::test_terminate`` (``handle.terminate()`` of a workflow whose
    activity is running): the run ends at once, nothing after the step starts, no reversal
    runs, and the late step result changes nothing."""
    path = str(tmp_path / "log")
    async with engine.worker([p2_terminated_mid_step]):
        handle = await engine.client.start(p2_terminated_mid_step, path)
        await wait_for(_marked(path, "do b start"))
        assert await engine.client.terminate(handle.run_id, "stop now") is True
        with pytest.raises(wayline.RunCancelledError):
            await handle.result(timeout=20)
        await wait_for(_marked(path, "do b"))
        await asyncio.sleep(0.3)
    assert lines(path) == ["do a", "do b start", "do b"]
    events = await handle.events()
    assert events[-1].type is EventType.RUN_CANCELLED and events[-1].data["terminated"] is True
    assert (await handle.status()) is wayline.RunStatus.CANCELLED
