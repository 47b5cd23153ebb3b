"""A third round of scenarios from other durable engines' end-to-end suites (DBOS Transact's
``test_failures.py``, ``test_dbos.py`` and ``test_workflow_management.py``, Temporal's Python
SDK ``tests/worker/test_workflow.py`` and ``temporalio/features``, Restate's and Inngest's SDK
tests), ported to Wayline as black-box tests on every world. Each docstring names the test it
ports. None repeats a scenario of ``test_peer_scenarios.py`` or ``test_peer_scenarios2.py``."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

import pytest

import wayline
from tests.runtime.flows import lines, mark
from tests.runtime.harness import Engine, of_type
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
        return {"name": err.error.get("name"), "message": err.error.get("message")}
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
    assert message in out["message"] and "gave up after 2 attempts" in out["message"], out
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
