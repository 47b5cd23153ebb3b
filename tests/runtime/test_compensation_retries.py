"""A compensation's retries: its own ``compensate_retry=`` policy, or the policy of a step
given as ``compensate=`` that declared one; otherwise the forward step's (it was always the
forward step's: ``max_retries=1`` on a booking gave its refund 2 attempts)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import wayline
from tests.runtime import compensation_retry_flows as flows
from tests.runtime import saga_flows
from tests.runtime.flows import lines
from tests.runtime.harness import Engine, wait_for
from wayline._core.definitions import StepDefinition

pytestmark = pytest.mark.engine_logic  # docs/testing.md, "The pyramid"


def _refunds(log: str) -> list[str]:
    return [line for line in lines(log) if line.startswith("refund attempt")]


async def _parked(engine: Engine, run_id: str, timeout: float = 20) -> None:
    async def stuck() -> bool:
        return await engine.client.handle(run_id).status() is wayline.RunStatus.COMPENSATION_STUCK

    await wait_for(stuck, timeout=timeout)


@pytest.mark.parametrize(
    ("workflow", "attempts"),
    [(flows.refund_tried_once, 1), (flows.refund_tried_thrice, 3)],
    ids=["one-attempt-under-forward-max-retries-3", "three-attempts-under-forward-max-retries-1"],
)
async def test_a_compensation_is_retried_by_its_own_policy(
    engine: Engine, tmp_path: Path, workflow: Any, attempts: int
) -> None:
    log = str(tmp_path / "log")
    async with engine.worker([workflow]):
        handle = await engine.client.start(workflow, log, "t1")
        await _parked(engine, handle.run_id)
    assert _refunds(log) == [f"refund attempt {n}" for n in range(1, attempts + 1)]


async def test_a_step_given_as_a_compensation_brings_the_retries_it_declared(
    engine: Engine, tmp_path: Path
) -> None:
    """``compensate=`` a ``@wayline.step(max_retries=0)`` under a forward step with
    ``max_retries=3``: the refund is tried once, not 4 times."""
    log = str(tmp_path / "log")
    async with engine.worker([saga_flows.trip_own_step_policy]):
        handle = await engine.client.start(saga_flows.trip_own_step_policy, log, "t2")
        await _parked(engine, handle.run_id)
    assert _refunds(log) == ["refund attempt 1"]


def _undo(path: str, trip: str) -> None:
    pass


def test_a_compensation_retry_that_is_not_a_policy_is_refused_at_declaration() -> None:
    with pytest.raises(wayline.ConfigurationError, match="compensate_retry= takes a wayline"):
        wayline.step(compensate=_undo, compensate_retry=3)(_undo_twin)  # type: ignore[arg-type]
    with pytest.raises(wayline.ConfigurationError, match="without compensate="):
        wayline.step(compensate_retry=wayline.RetryPolicy(max_attempts=2))(_undo_twin)


def _undo_twin(path: str, trip: str) -> str:
    return trip


def test_only_a_compensation_policy_of_its_own_enters_the_identity() -> None:
    """Recorded as the forward step's own retries are, so a worker whose compensation
    retries otherwise does not drive the run; absent when inherited, so the identities of
    existing definitions (and the runs pinned to them) hold."""
    own = wayline.step(
        compensate=_undo, compensate_retry=wayline.RetryPolicy(max_attempts=1), name="own_retry"
    )(_undo_twin)
    assert own.compensation is not None and own.compensation.max_retries == 0
    assert own.identity_entry()[2]["compensateRetry"] == {"maxRetries": 0, "retryDelay": 1.0}
    inherited = saga_flows.trip_charge_card
    assert inherited.compensation is not None
    assert inherited.compensation.retry == inherited.retry
    assert "compensateRetry" not in inherited.identity_entry()[2]
    undeclared: StepDefinition[..., Any] = wayline.step(_undo_twin)
    forward = wayline.step(compensate=undeclared, max_retries=1, name="undo_twin_forward")
    definition = forward(_undo)
    assert definition.compensation is not None
    assert definition.compensation.max_retries == 1  # the step declared nothing: inherited
