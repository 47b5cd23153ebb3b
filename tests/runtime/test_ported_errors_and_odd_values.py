"""Errors that do not serialise or print, base exceptions, odd names and values: scenarios from
other durable engines' end-to-end suites (DBOS Transact's ``test_failures.py``, ``test_dbos.py``
and ``test_queue.py``, Temporal's Python SDK ``tests/worker/test_workflow.py`` and
``temporalio/features``, Restate's, Inngest's and Hatchet's SDK tests), ported to Wayline as
black-box tests on every world. Each docstring names what it ports. None repeats a scenario of
``test_peer_scenarios.py`` or ``test_ported_hooks_children_and_retries.py``."""

from __future__ import annotations

import asyncio
import itertools
import uuid
from pathlib import Path
from typing import Any

import pydantic
import pytest

import wayline
from tests.runtime.flows import lines, mark
from tests.runtime.harness import Engine, of_type, settings, wait_for
from wayline._core.events import EventType


def _token() -> str:
    return f"p3-{uuid.uuid4().hex[:12]}"


def _marked(path: str, label: str) -> Any:
    async def check() -> bool:
        return label in lines(path)

    return check


# --- errors that do not serialise (DBOS test_failures.py) ---------------------------------------


class TwoArgError(Exception):
    """DBOS's ``BadException``: its constructor cannot be called again with its own ``args``."""

    def __init__(self, one: int, two: int) -> None:
        super().__init__(f"Message: {one}, {two}")


class CarriesAnObject(Exception):
    def __init__(self, msg: str) -> None:
        super().__init__(msg)
        self.handle = object()  # neither JSON nor picklable
        self.callback = lambda: None


class BadStr(Exception):
    def __str__(self) -> str:
        raise RuntimeError("__str__ itself fails")


@wayline.step(max_retries=1, retry_delay=0.01)
async def p3_raises(path: str, kind: str) -> None:
    mark(path, kind)
    if kind == "two-arg":
        raise TwoArgError(1, 2)
    if kind == "object":
        raise CarriesAnObject("carries an object")
    raise BadStr("never shown")


@wayline.workflow
async def p3_catches(path: str, kind: str) -> dict[str, Any]:
    try:
        await p3_raises(path, kind)
    except wayline.StepFailedError as err:
        return {"name": err.error.get("name"), "message": err.message, "attempt": err.cause.attempt}
    return {}


@pytest.mark.parametrize(
    ("kind", "name", "message"),
    [
        ("two-arg", "TwoArgError", "Message: 1, 2"),
        ("object", "CarriesAnObject", "carries an object"),
        ("bad-str", "BadStr", "BadStr"),
    ],
)
async def test_a_step_error_that_does_not_serialise_still_reaches_the_workflow(
    engine: Engine, tmp_path: Path, kind: str, name: str, message: str
) -> None:
    """DBOS ``test_failures.py::test_error_serialization`` (an exception whose constructor
    cannot rebuild it from its args) and exceptions carrying unserialisable attributes or a
    ``__str__`` that raises: the error crosses the durable boundary as data, so each is
    recorded by its class name and the workflow catches it after the retries its policy
    allows, no more."""
    path = str(tmp_path / "log")
    async with engine.worker([p3_catches]):
        handle = await engine.client.start(p3_catches, path, kind)
        out = await handle.result(timeout=20)
    assert out["name"] == name, out
    assert message in out["message"] and out["attempt"] == 2, out
    assert lines(path) == [kind, kind]


@wayline.workflow
async def p3_body_bad_str() -> None:
    raise BadStr("x")


async def test_a_workflow_body_error_whose_str_raises_fails_the_run(engine: Engine) -> None:
    """The same raised by the workflow body itself (DBOS ``test_error_serialization``'s
    ``safe_deserialize``: an error that cannot be rendered still ends the workflow): the run
    fails naming the class; its delivery does not crash and go round again."""
    async with engine.worker([p3_body_bad_str]):
        handle = await engine.client.start(p3_body_bad_str)
        with pytest.raises(wayline.RunFailedError, match="BadStr"):
            await handle.result(timeout=10)
    [failed] = of_type(await handle.events(), EventType.RUN_FAILED)
    assert failed.data["error"]["name"] == "BadStr"


class Abort(BaseException):
    """Not an ``Exception``: what some libraries raise to unwind (gevent's ``Timeout``)."""


@wayline.step(max_retries=1, retry_delay=0.01)
async def p3_base_exc(path: str) -> str:
    mark(path, "try")
    if len(lines(path)) == 1:
        raise Abort("not an Exception")
    return "ok"


@wayline.workflow
async def p3_base_flow(path: str) -> str:
    return await p3_base_exc(path)


async def test_a_step_raising_a_base_exception_is_retried_by_its_policy(
    engine: Engine, tmp_path: Path
) -> None:
    """DBOS ``test_failures.py::test_keyboardinterrupt_during_retries`` (a step raising a
    ``BaseException`` that is not an ``Exception``; the workflow still completes): the attempt
    is recorded as failed and retried at once under the step's policy, not left unsettled
    until its message's visibility runs out."""
    path = str(tmp_path / "log")
    async with engine.worker([p3_base_flow]):
        handle = await engine.client.start(p3_base_flow, path)
        assert await handle.result(timeout=10) == "ok"
    assert lines(path) == ["try", "try"]
    [retrying] = of_type(await handle.events(), EventType.STEP_RETRYING)
    assert "Abort" in str(retrying.data)


@wayline.step(max_retries=1, retry_delay=0.01)
async def p3_own_cancel(path: str) -> str:
    mark(path, "try")
    if len(lines(path)) == 1:
        inner = asyncio.ensure_future(asyncio.sleep(60))
        inner.cancel()
        await inner  # the body's own task was cancelled: a CancelledError nobody asked of it
    return "ok"


@wayline.workflow
async def p3_own_cancel_flow(path: str) -> str:
    return await p3_own_cancel(path)


async def test_a_cancelled_error_of_the_bodys_own_making_is_retried(
    engine: Engine, tmp_path: Path
) -> None:
    """Temporal's activity tests tell a cancel the worker asked for from an activity that
    lets a ``CancelledError`` of its own escape: the latter is an ordinary failure of the
    attempt, retried by the policy; the delivery is not stopped and left unsettled."""
    path = str(tmp_path / "log")
    async with engine.worker([p3_own_cancel_flow]):
        handle = await engine.client.start(p3_own_cancel_flow, path)
        assert await handle.result(timeout=10) == "ok"
    assert lines(path) == ["try", "try"]


@wayline.workflow
async def p3_body_base_exc() -> None:
    raise Abort("raised by the workflow body")


async def test_a_workflow_body_raising_a_base_exception_fails_the_run(engine: Engine) -> None:
    """The same ``BaseException`` raised by the workflow body: the run fails naming it."""
    async with engine.worker([p3_body_base_exc]):
        handle = await engine.client.start(p3_body_base_exc)
        with pytest.raises(wayline.RunFailedError, match="Abort"):
            await handle.result(timeout=10)


# --- steps called where a step is not a durable call -------------------------------------------


@wayline.step
async def p3_inner(n: int) -> int:
    return n + 1


@wayline.step(max_retries=0)
async def p3_outer(n: int) -> int:
    return await p3_inner(n) * 10


@wayline.workflow
async def p3_nested(n: int) -> int:
    return await p3_outer(n)


async def test_a_step_called_from_a_step_body_is_a_plain_call(engine: Engine) -> None:
    """DBOS runs a step called from a step as part of the calling step (no checkpoint of its
    own); so does Wayline: the inner call is a plain call inside the outer body, and the log
    holds the outer step only."""
    async with engine.worker([p3_nested]):
        handle = await engine.client.start(p3_nested, 1)
        assert await handle.result(timeout=20) == 20
    created = of_type(await handle.events(), EventType.STEP_CREATED)
    assert [e.data["stepName"] for e in created] == ["p3_outer"]


async def test_a_step_called_outside_any_workflow_is_a_plain_call() -> None:
    """DBOS ``test_failures.py::test_step_retries`` ("calling the step directly"): a step
    called with no workflow around it runs its body as a plain function."""
    assert await p3_inner(1) == 2


# --- values: bytes (Temporal's binary/plain payload converter) --------------------------------


@wayline.step
async def p3_bytes_step(data: bytes) -> bytes:
    assert isinstance(data, bytes)
    return data + b"!"


@wayline.workflow
async def p3_bytes_flow(text: str) -> str:
    back = await p3_bytes_step(text.encode())
    return f"{type(back).__name__}:{back.decode()}"


@wayline.workflow
async def p3_raw_bytes() -> Any:
    return b"\x00\xff"


async def test_bytes_cross_as_their_annotation_and_binary_fails_clearly(engine: Engine) -> None:
    """Temporal's ``binary/plain`` payloads: Wayline's values are JSON, so bytes cross only
    where an annotation rebuilds them (as text); bytes that are not text fail the run with a
    ``SERIALIZATION_ERROR`` naming the type, not a traceback or a stuck run."""
    async with engine.worker([p3_bytes_flow, p3_raw_bytes]):
        handle = await engine.client.start(p3_bytes_flow, "été🙂")
        assert await handle.result(timeout=20) == "bytes:été🙂!"
        raw = await engine.client.start(p3_raw_bytes)
        with pytest.raises(wayline.RunFailedError, match=r"SERIALIZATION_ERROR.*bytes"):
            await raw.result(timeout=20)


# --- hooks: a payload before the await (Temporal features signal tests, DBOS send/recv) ------


@wayline.step(max_retries=0)
async def p3_busy(path: str) -> str:
    mark(path, "busy")
    go = Path(path + ".go")
    for _ in range(1000):
        if go.exists():  # noqa: ASYNC240 - a tiny local marker file
            return "done"
        await asyncio.sleep(0.01)
    return "gave up"


@wayline.workflow
async def p3_hook_then_busy(path: str, token: str) -> list[Any]:
    hook = wayline.create_hook(token)
    busy = await p3_busy(path)
    return [busy, await hook]


async def test_a_payload_sent_while_the_run_is_busy_is_kept_for_its_await(
    engine: Engine, tmp_path: Path
) -> None:
    """Temporal's ``features`` signal tests (a signal that arrives before the workflow's
    ``wait_condition``) and DBOS ``test_dbos.py`` send/recv (a message sent before ``recv``):
    a hook created before a long step is resumed while the step runs; the payload waits in
    the log and the later ``await`` returns it, with the step's body run once."""
    path, token = str(tmp_path / "log"), _token()
    async with engine.worker([p3_hook_then_busy]):
        handle = await engine.client.start(p3_hook_then_busy, path, token)
        await wait_for(_marked(path, "busy"))
        await wait_for(lambda: engine.world.get_hook(token))
        assert await engine.client.resume_hook(token, {"early": True}) == handle.run_id
        Path(path + ".go").touch()  # noqa: ASYNC240 - a tiny local marker file
        assert await handle.result(timeout=20) == ["done", {"early": True}]
    assert lines(path) == ["busy"]


# --- children: recursion (Temporal child workflow tests, Restate nested calls) ----------------


@wayline.workflow
async def p3_nest(depth: int) -> list[dict[str, Any]]:
    info = wayline.workflow_info()
    me = {"depth": depth, "run": info.run_id, "parent": info.parent_run_id}
    below = await wayline.child(p3_nest, depth - 1) if depth > 0 else []
    return [me, *below]


async def test_a_workflow_that_starts_itself_as_a_child_five_deep(engine: Engine) -> None:
    """Temporal ``test_workflow.py`` child-workflow tests taken recursively: a workflow that
    is its own child (its identity must not recurse forever) runs five levels deep, each
    level's parent is the level above, and the deepest result climbs back up."""
    async with engine.worker([p3_nest]):
        handle = await engine.client.start(p3_nest, 5)
        chain = await handle.result(timeout=30)
    assert [c["depth"] for c in chain] == [5, 4, 3, 2, 1, 0]
    assert chain[0]["run"] == handle.run_id and chain[0]["parent"] is None
    for above, below in itertools.pairwise(chain):
        assert below["parent"] == above["run"]
    assert len({c["run"] for c in chain}) == 6


# --- idempotency keys in a loop (Inngest: a step id reused in a loop gets an index) -----------


@wayline.step
async def p3_key(tag: str) -> str:
    return wayline.step_context().idempotency_key


@wayline.workflow
async def p3_keys(token: str) -> list[list[str]]:
    first = [await p3_key("same") for _ in range(3)]
    await wayline.create_hook(token)  # the rest runs in a replay of the first part
    second = [await p3_key("same") for _ in range(2)]
    return [first, second]


async def test_one_step_called_in_a_loop_gets_a_key_per_iteration(engine: Engine) -> None:
    """Inngest's SDK tests of a ``step.run`` id reused in a loop (each call is its own step,
    with an index) and DBOS's per-call step ids: five calls of one step with the same
    arguments, across a replay, have five distinct keys of the documented shape."""
    token = _token()
    async with engine.worker([p3_keys]):
        handle = await engine.client.start(p3_keys, token)
        await wait_for(lambda: engine.world.get_hook(token))
        await engine.client.resume_hook(token, None)
        first, second = await handle.result(timeout=20)
    keys = first + second
    assert len(set(keys)) == 5, keys
    for key in keys:
        assert key.startswith(f"{handle.run_id}:p3_key#") and key.endswith(":forward"), key


# --- determinism after a killed worker (Temporal uuid4/random/now, DBOS recovery) -------------


@wayline.step(max_retries=0)
async def p3_record(value: Any) -> Any:
    return value


@wayline.step(max_retries=2, retry_delay=0.01)  # a killed attempt counts as one
async def p3_hang_once(path: str) -> str:
    first = "hang" not in lines(path)
    mark(path, "hang")
    if first:
        await asyncio.sleep(60)  # the worker is killed under it
    return "resumed"


@wayline.workflow
async def p3_draws(path: str) -> dict[str, Any]:
    drawn = [wayline.now().isoformat(), str(wayline.uuid4()), wayline.random()]
    recorded = await p3_record(drawn)
    await p3_hang_once(path)
    later = [str(wayline.uuid4()), wayline.random()]
    return {"recorded": recorded, "replayed": drawn, "later": await p3_record(later)}


async def test_now_uuid_and_random_are_the_same_after_a_killed_worker(
    engine: Engine, tmp_path: Path
) -> None:
    """Temporal's deterministic ``workflow.uuid4()``/``random()``/``now()`` (replayed on a new
    worker after the first died) and DBOS ``test_failures.py::test_recovery_during_retries``:
    the values drawn before the kill are drawn again, equal, by the worker that recovers the
    run, and the draws after it go on from there."""
    path = str(tmp_path / "log")
    worker = wayline.Worker(engine.world, [p3_draws], settings=settings())
    await worker.start()
    handle = await engine.client.start(p3_draws, path)
    await wait_for(_marked(path, "hang"))
    await worker.close(graceful=False)
    async with engine.worker([p3_draws]):
        out = await handle.result(timeout=30)
    assert out["recorded"] == out["replayed"]
    assert out["later"][0] not in out["recorded"]
    assert lines(path) == ["hang", "hang"]


# --- combinators ------------------------------------------------------------------------------


@wayline.step(max_retries=0)
async def p3_fail_now(msg: str) -> str:
    raise ValueError(msg)


@wayline.workflow
async def p3_race_failure(token: str) -> dict[str, Any]:
    try:
        await wayline.race(p3_fail_now("first to settle"), wayline.create_hook(token))
    except wayline.StepFailedError as err:
        return {"step": err.step_name, "message": err.error.get("message")}
    return {}


async def test_a_race_whose_first_settled_member_failed_raises_its_error(engine: Engine) -> None:
    """Temporal ``workflow.wait(..., return_when=FIRST_COMPLETED)`` and ``asyncio.wait`` over a
    failing activity, Restate ``select``: ``race`` settles with its first member, a failure
    included (unlike ``any``), and the workflow catches it."""
    async with engine.worker([p3_race_failure]):
        handle = await engine.client.start(p3_race_failure, _token())
        out = await handle.result(timeout=20)
    assert out["step"] == "p3_fail_now" and "first to settle" in out["message"]


# --- compensation of a step that failed for good (Temporal saga sample) ------------------------


def _p3_undo(path: str, label: str) -> None:
    mark(path, f"undo {label}")


@wayline.step(max_retries=1, retry_delay=0.01, compensate=_p3_undo)
async def p3_do(path: str, label: str) -> str:
    mark(path, f"do {label}")
    if label == "fails":
        raise OSError("never reaches the provider")
    return label


@wayline.workflow
async def p3_saga(path: str) -> None:
    await p3_do(path, "ok")
    await p3_do(path, "fails")


async def test_a_step_that_failed_for_good_is_not_compensated(
    engine: Engine, tmp_path: Path
) -> None:
    """Temporal's saga sample registers a compensation before its activity, so it also
    reverses the activity that failed; Wayline's docs reverse what completed (or whose
    outcome is unknown), so only the completed step is undone, once."""
    path = str(tmp_path / "log")
    async with engine.worker([p3_saga]):
        handle = await engine.client.start(p3_saga, path)
        with pytest.raises(wayline.RunFailedError, match="never reaches the provider"):
            await handle.result(timeout=20)
    assert lines(path) == ["do ok", "do fails", "do fails", "undo ok"]


# --- names (Temporal workflow ids/types with any characters) ----------------------------------


@wayline.step(name="réserver.stock 🙂")
async def p3_named_step(n: int) -> int:
    return n * 3


@wayline.workflow(name="commande.été 🙂")
async def p3_named_flow(n: int) -> dict[str, Any]:
    return {"n": await p3_named_step(n), "name": wayline.workflow_info().workflow_name}


async def test_workflow_and_step_names_with_dots_spaces_and_emoji(engine: Engine) -> None:
    """Temporal accepts any string as a workflow type; so do Wayline's names, which become
    route tokens (NATS subjects) and log fields: a run of such a workflow completes."""
    async with engine.worker([p3_named_flow]):
        handle = await engine.client.start(p3_named_flow, 2)
        assert await handle.result(timeout=20) == {"n": 6, "name": "commande.été 🙂"}
    created = of_type(await handle.events(), EventType.STEP_CREATED)
    assert [e.data["stepName"] for e in created] == ["réserver.stock 🙂"]
    assert [r.run_id for r in await engine.world.list_runs(workflow="commande.été 🙂")] == [
        handle.run_id
    ]


@wayline.step(max_retries=1, retry_delay=0.01)
def p3_sync_base_exc(path: str) -> str:
    mark(path, "try")
    if len(lines(path)) == 1:
        raise Abort("raised in the step's thread")
    return "ok"


@wayline.workflow
async def p3_sync_base_flow(path: str) -> str:
    return await p3_sync_base_exc(path)


async def test_a_plain_def_step_raising_a_base_exception_is_retried_too(
    engine: Engine, tmp_path: Path
) -> None:
    """The ``BaseException`` of DBOS ``test_keyboardinterrupt_during_retries`` raised by a
    plain ``def`` step, in its thread: the same failed attempt, the same retry."""
    path = str(tmp_path / "log")
    async with engine.worker([p3_sync_base_flow]):
        handle = await engine.client.start(p3_sync_base_flow, path)
        assert await handle.result(timeout=10) == "ok"
    assert lines(path) == ["try", "try"]


# --- typed hooks and timeouts (Temporal wait_condition(timeout=) on a typed signal) ----------


class P3Approval(wayline.Hook, pydantic.BaseModel):
    approved: bool
    by: str


@wayline.workflow
async def p3_typed_timeout(token: str) -> list[Any]:
    got: list[Any] = []
    try:
        got.append(await P3Approval.wait(token, timeout=0.2))
    except wayline.HookTimeout:
        got.append("timeout")
    again = await P3Approval.wait(token, timeout="1h")
    got.append([type(again).__name__, again.approved, again.by])
    return got


async def test_a_typed_wait_that_timed_out_then_a_second_wait_gets_its_payload(
    engine: Engine,
) -> None:
    """Temporal ``workflow.wait_condition(..., timeout=)`` on a typed signal, then waiting
    again: the first typed wait raises ``HookTimeout``, the token is free, and the second wait
    on it receives the payload as the class; a payload that does not validate is refused
    before anything is written."""
    token = _token()
    async with engine.worker([p3_typed_timeout]):
        handle = await engine.client.start(p3_typed_timeout, token)

        async def second_wait() -> bool:
            hooks = of_type(await handle.events(), EventType.HOOK_CREATED)
            return len(hooks) == 2

        await wait_for(second_wait)
        with pytest.raises(wayline.errors.InvalidPayloadError, match="by: Field required"):
            await engine.client.resume_hook(token, {"approved": True})
        await P3Approval.resume(engine.client, token, P3Approval(approved=True, by="ana"))
        assert await handle.result(timeout=20) == ["timeout", ["P3Approval", True, "ana"]]


# --- concurrency keys that raise (DBOS partitioned queues, Hatchet concurrency expressions) ---


def _bad_key(path: str, who: str) -> str:
    raise KeyError(f"no partition for {who}")


@wayline.step(concurrency=wayline.Limit(key=_bad_key, max=1))
async def p3_keyed_step(path: str, who: str) -> str:
    mark(path, f"ran {who}")
    return who


@wayline.workflow
async def p3_step_key_fails(path: str) -> dict[str, Any]:
    try:
        await p3_keyed_step(path, "ana")
    except wayline.StepFailedError as err:
        return {"code": err.error.get("code"), "message": err.error.get("message")}
    return {}


@wayline.workflow(concurrency=wayline.Limit(key=_bad_key, max=1))
async def p3_flow_key_fails(path: str, who: str) -> str:
    mark(path, f"flow {who}")
    return who


async def test_a_concurrency_key_that_raises_fails_clearly_and_runs_nothing(
    engine: Engine, tmp_path: Path
) -> None:
    """DBOS ``test_queue.py`` partitioned queues (an enqueue whose partition key cannot be
    had is refused) and Hatchet concurrency expressions: a key function that raises fails
    the step (``CONCURRENCY_KEY``, caught by the workflow) or the run, naming the error, and
    runs no body."""
    path = str(tmp_path / "log")
    async with engine.worker([p3_step_key_fails, p3_flow_key_fails]):
        step = await engine.client.start(p3_step_key_fails, path)
        out = await step.result(timeout=20)
        flow = await engine.client.start(p3_flow_key_fails, path, "bob")
        with pytest.raises(wayline.RunFailedError, match="CONCURRENCY_KEY") as caught:
            await flow.result(timeout=20)
    assert out["code"] == "CONCURRENCY_KEY" and "no partition for ana" in out["message"]
    assert "no partition for bob" in str(caught.value)
    assert lines(path) == []


class _Unprintable(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no text for this one")


def _unprintable_key(path: str, who: str) -> str:
    raise _Unprintable


@wayline.step(concurrency=wayline.Limit(key=_unprintable_key, max=1))
async def p3_unprintable_key_step(path: str, who: str) -> str:
    mark(path, f"ran {who}")
    return who


@wayline.workflow
async def p3_unprintable_step_key(path: str) -> dict[str, Any]:
    try:
        await p3_unprintable_key_step(path, "ana")
    except wayline.StepFailedError as err:
        return {"code": err.error.get("code"), "message": err.error.get("message")}
    return {}


@wayline.workflow(concurrency=wayline.Limit(key=_unprintable_key, max=1))
async def p3_unprintable_flow_key(path: str, who: str) -> str:
    mark(path, f"flow {who}")
    return who


class _OddCode(Exception):
    wayline_code = {"not": "a code"}  # a user attribute the log cannot take as a code


@wayline.step(max_retries=0)
async def p3_odd_code(path: str) -> str:
    mark(path, "odd")
    raise _OddCode("declined")


@wayline.workflow
async def p3_odd_code_flow(path: str) -> dict[str, Any]:
    try:
        await p3_odd_code(path)
    except wayline.StepFailedError as err:
        return {"code": err.error.get("code"), "message": err.error.get("message")}
    return {}


async def test_a_key_error_that_cannot_be_printed_and_a_code_that_is_not_text_fail_clearly(
    engine: Engine, tmp_path: Path
) -> None:
    """The same as above with the user's error at its worst: a key function's error whose
    ``__str__`` raises, and a step error whose ``wayline_code`` is not a string. Each fails
    its step or run with a readable error, and nothing is left for the message's
    visibility to time out."""
    path = str(tmp_path / "log")
    async with engine.worker([p3_unprintable_step_key, p3_unprintable_flow_key, p3_odd_code_flow]):
        step = await engine.client.start(p3_unprintable_step_key, path)
        out = await step.result(timeout=20)
        flow = await engine.client.start(p3_unprintable_flow_key, path, "bob")
        with pytest.raises(wayline.RunFailedError, match="CONCURRENCY_KEY") as caught:
            await flow.result(timeout=20)
        odd = await (await engine.client.start(p3_odd_code_flow, path)).result(timeout=20)
    assert out["code"] == "CONCURRENCY_KEY" and "str() raised RuntimeError" in out["message"]
    assert "_Unprintable" in str(caught.value)
    assert odd["code"] == "USER_ERROR" and "declined" in odd["message"], odd
    assert lines(path) == ["odd"]
