"""A run that fails because a step (or a child) failed says why to whoever asks for its
result (both worlds): the run's error is ``STEP_FAILED`` (``CHILD_FAILED``) and carries the
step's own name, code and message under ``cause``, as Temporal's ``cause`` and Restate's
terminal error code do. The client saw only the wrapper's name, message and stack."""

from __future__ import annotations

import pytest

import wayline
from tests.runtime.harness import Engine

pytestmark = pytest.mark.engine_logic  # docs/testing.md, "The pyramid"


class CardDeclined(Exception):
    wayline_code = "CARD_DECLINED"


@wayline.step(max_retries=0)
async def charge_declined() -> None:
    raise CardDeclined("insufficient funds")


@wayline.workflow
async def declined_order() -> None:
    await charge_declined()


@wayline.workflow
async def declined_parent() -> None:
    await wayline.child(declined_order)


async def test_the_failing_steps_code_reaches_the_client(engine: Engine) -> None:
    async with engine.worker([declined_order, declined_parent]):
        order = await engine.client.start(declined_order)
        with pytest.raises(wayline.RunFailedError) as failed:
            await order.result(timeout=30)
        parent = await engine.client.start(declined_parent)
        with pytest.raises(wayline.RunFailedError) as parent_failed:
            await parent.result(timeout=30)
    error = failed.value.error
    assert error["code"] == "STEP_FAILED"
    assert error["cause"] == {
        "name": "CardDeclined",
        "code": "CARD_DECLINED",
        "message": "insufficient funds",
        "attempt": 1,
        "attempts": 1,
        "notRetriedBecause": "retries exhausted",
    }
    outer = parent_failed.value.error
    assert outer["code"] == "CHILD_FAILED"
    assert outer["cause"]["code"] == "STEP_FAILED"
    assert outer["cause"]["cause"]["code"] == "CARD_DECLINED"


def test_a_cause_built_by_hand_is_json_and_bounded() -> None:
    import json

    from wayline._core.serde import error_to_dict

    inner: dict[str, object] = {"code": 402, "message": ValueError("boom"), "name": None}
    for _ in range(10):
        inner = {"name": "StepFailedError", "code": "STEP_FAILED", "message": "m", "cause": inner}
    recorded = error_to_dict(wayline.StepFailedError("s", inner))
    json.dumps(recorded)  # raised TypeError (a ValueError in the message)
    depth, cause = 0, recorded.get("cause")
    while isinstance(cause, dict):
        depth, cause = depth + 1, cause.get("cause")
    assert depth == 4
