"""``wayline.testing.step_context``: a step body that reads ``step_context()`` is called as a
plain function in a unit test, with the context a worker would give it."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

import wayline
import wayline.testing
from wayline._engine.step_runner import idempotency_key


def refund_wallet(order_id: str) -> dict[str, Any]:
    ctx = wayline.step_context()
    return {
        "key": ctx.idempotency_key,
        "direction": ctx.direction,
        "forward": ctx.forward_idempotency_key,
        "result": ctx.forward_result,
    }


@wayline.step(compensate=refund_wallet)
async def debit_wallet(order_id: str) -> dict[str, Any]:
    ctx = wayline.step_context()
    return {"key": ctx.idempotency_key, "attempt": ctx.attempt, "run": ctx.run_id}


@wayline.step
def hold_seat(sku: str) -> str:
    return f"{sku}@{wayline.step_context().step_id}"


async def test_an_async_step_reads_the_context_a_worker_would_give() -> None:
    with pytest.raises(wayline.NotInStepError):
        await debit_wallet("o-1")  # the failure this helper is for
    with wayline.testing.step_context(debit_wallet, attempt=2) as ctx:
        out = await debit_wallet("o-1")
    run = wayline.testing.TEST_RUN_ID
    assert out == {"key": idempotency_key(run, "debit_wallet", 0), "attempt": 2, "run": run}
    assert ctx.step_name == "debit_wallet" and ctx.started_at is not None
    with pytest.raises(wayline.NotInStepError):  # the block's context ends with it
        wayline.step_context()


def test_a_sync_step_and_every_field_given() -> None:
    at = datetime(2026, 1, 2, tzinfo=UTC)
    run = "wf_" + "1" * 32
    with wayline.testing.step_context(
        "hold_seat", run_id=run, step_id="s7", idempotency_key="k-1", started_at=at
    ) as ctx:
        assert hold_seat("BOOK") == "BOOK@s7"
        assert (ctx.run_id, ctx.idempotency_key, ctx.started_at) == (run, "k-1", at)
        with wayline.testing.step_context("inner", occurrence=3):
            assert wayline.step_context().idempotency_key.endswith(":inner#3:forward")
        assert wayline.step_context() is ctx  # the outer one is back


def test_a_compensation_gets_its_own_key_and_the_forward_result() -> None:
    assert debit_wallet.compensation is not None
    with wayline.testing.step_context(debit_wallet.compensation, forward_result={"id": 9}):
        out = refund_wallet("o-1")
    run = wayline.testing.TEST_RUN_ID
    assert out == {
        "key": idempotency_key(run, "debit_wallet", 0, "compensate"),
        "direction": "compensate",
        "forward": idempotency_key(run, "debit_wallet", 0),
        "result": {"id": 9},
    }
