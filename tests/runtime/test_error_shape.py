"""One error shape, on both worlds: a failure keeps the user's own message untouched from the
step body to ``RunFailedError``, the engine's words (which step, which attempt of how many, why
no other followed) ride in ``ErrorCause`` fields, ``str()`` reads as one sentence, the old
``error_code`` still answers with a warning, and a failure recorded by an older release (its
message with the engine's text appended) reads into the same shape."""

from __future__ import annotations

import pytest

import wayline
from tests.runtime.harness import Engine
from wayline._core.events import EventType, NewEvent
from wayline._engine.ending import terminal

pytestmark = pytest.mark.engine_logic  # docs/testing.md, "The pyramid"


class CardDeclined(Exception):
    pass


@wayline.step(max_retries=2, retry_delay="1ms", name="tests.shape.charge")
async def charge(card: str) -> None:
    raise CardDeclined(f"card {card} declined")


@wayline.workflow(name="tests.shape.order")
async def order(card: str) -> None:
    await charge(card)


@wayline.workflow(name="tests.shape.order_catches")
async def order_catches(card: str) -> dict[str, object]:
    try:
        await charge(card)
    except wayline.StepFailedError as err:
        return {
            "message": err.message,
            "recorded": err.error["message"],
            "attempt": err.cause.attempt,
            "text": str(err),
        }
    return {}


def declined(message: str) -> wayline.ErrorCause:
    """The step body's own error, as its third and last attempt recorded it."""
    return wayline.ErrorCause(
        code="USER_ERROR",
        name="CardDeclined",
        message=message,
        attempt=3,
        attempts=3,
        not_retried_because="retries exhausted",
    )


@wayline.workflow(name="tests.shape.parent")
async def parent(card: str) -> None:
    await wayline.child(order, card)


async def test_the_users_message_reaches_the_client_untouched(engine: Engine) -> None:
    async with engine.worker([order, order_catches]):
        caught = await (await engine.client.start(order_catches, "4242")).result(timeout=30)
        handle = await engine.client.start(order, "4242")
        with pytest.raises(wayline.RunFailedError) as failed:
            await handle.result(timeout=30)
    assert caught == {
        "message": "card 4242 declined",
        "recorded": "card 4242 declined",
        "attempt": 3,
        "text": "step 'tests.shape.charge' raised CardDeclined: card 4242 declined "
        "(attempt 3 of 3, retries exhausted)",
    }
    err = failed.value
    assert err.code == "RUN_FAILED"
    assert err.message == "card 4242 declined"
    assert err.cause == wayline.ErrorCause(
        code="STEP_FAILED",
        name="StepFailedError",
        message="card 4242 declined",
        step="tests.shape.charge",
        cause=declined("card 4242 declined"),
    )
    assert str(err) == (
        f"run {handle.run_id} failed: step 'tests.shape.charge' raised CardDeclined: "
        "card 4242 declined (attempt 3 of 3, retries exhausted)"
    )


async def test_the_cause_chain_runs_through_a_child(engine: Engine) -> None:
    async with engine.worker([order, parent]):
        handle = await engine.client.start(parent, "4000")
        with pytest.raises(wayline.RunFailedError) as failed:
            await handle.result(timeout=30)
    err = failed.value
    assert err.message == "card 4000 declined"
    child = err.cause
    assert child.code == "CHILD_FAILED" and child.run_id is not None
    assert child.message == "card 4000 declined"
    step = child.cause
    assert step is not None and step.code == "STEP_FAILED"
    assert step.step == "tests.shape.charge"
    assert step.cause is not None and step.cause.name == "CardDeclined"
    assert step.cause.message == "card 4000 declined" and step.cause.attempt == 3
    assert err.cause.root is step.cause
    assert str(err) == (
        f"run {handle.run_id} failed: child run {child.run_id} failed because step "
        "'tests.shape.charge' raised CardDeclined: card 4000 declined "
        "(attempt 3 of 3, retries exhausted)"
    )


async def test_error_code_still_answers_with_a_deprecation_warning(engine: Engine) -> None:
    async with engine.worker([order]):
        handle = await engine.client.start(order, "1")
        with pytest.raises(wayline.RunFailedError) as failed:
            await handle.result(timeout=30)
    with pytest.warns(DeprecationWarning, match=r"err\.cause\.code"):
        code = failed.value.error_code  # type: ignore[deprecated]
    assert code == failed.value.cause.code == "STEP_FAILED"


OLD_STEP_FAILURE = {
    "name": "StepFailedError",
    "code": "STEP_FAILED",
    "message": "step 'tests.shape.charge' failed: CardDeclined: card 9 declined "
    "(gave up after 3 attempts) (compensation abandoned)",
    "stack": "Traceback (most recent call last): ...",
    "cause": {
        "name": "CardDeclined",
        "code": "USER_ERROR",
        "message": "card 9 declined (gave up after 3 attempts)",
    },
}
"""A run's error as the release before recorded it: the engine's words appended to the
user's message at each level."""


async def test_a_failure_recorded_in_the_old_shape_reads_in_the_new_one(
    engine: Engine,
) -> None:
    handle = await engine.client.start(order, "9")  # no worker: the run only waits
    await terminal(
        engine.world,
        handle.run_id,
        NewEvent(EventType.RUN_FAILED, data={"error": OLD_STEP_FAILURE}),
    )
    with pytest.raises(wayline.RunFailedError) as failed:
        await handle.result(timeout=30)
    err = failed.value
    assert err.message == "card 9 declined"
    assert err.cause.step == "tests.shape.charge" and err.cause.compensation_abandoned
    assert err.cause.cause == declined("card 9 declined")
    assert str(err) == (
        f"run {handle.run_id} failed: step 'tests.shape.charge' raised CardDeclined: "
        "card 9 declined (attempt 3 of 3, retries exhausted), and its compensation was "
        "abandoned"
    )
    assert (await handle.events())[-1].data["error"] == OLD_STEP_FAILURE  # read, not rewritten


def test_a_non_retryable_failure_of_the_old_shape_reads_its_reason() -> None:
    cause = wayline.ErrorCause.from_recorded(
        {"name": "OutOfStock", "message": "GONE (not retried: OutOfStock is non-retryable)"}
    )
    assert (cause.message, cause.not_retried_because) == ("GONE", "OutOfStock is non-retryable")
    assert str(cause) == "OutOfStock: GONE (OutOfStock is non-retryable)"


def test_a_child_that_was_cancelled_is_not_said_to_have_failed() -> None:
    err = wayline.RunFailedError(
        run_id="wf_p",
        error={
            "name": "ChildFailedError",
            "code": "CHILD_FAILED",
            "message": "no longer needed",
            "runId": "wf_c",
            "cause": {"code": "RUN_CANCELLED", "message": "no longer needed"},
        },
    )
    assert err.message == "no longer needed"
    assert str(err) == "run wf_p failed: child run wf_c was cancelled (no longer needed)"
