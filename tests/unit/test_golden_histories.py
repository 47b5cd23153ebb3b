"""Recorded histories replayed offline (``wayline.testing.replay``): the examples' golden logs
replay against their current code, and a change that would block or strand a live run is
named before it is deployed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from examples import retry_policy, trip_saga, typed_hooks
from examples.typed_hooks import Approval

import wayline
import wayline.testing
from wayline._core.histories import parse_history

GOLDEN = Path(__file__).resolve().parent.parent / "golden" / "examples.jsonl"
EXAMPLES = [trip_saga.trip, typed_hooks.expense, retry_policy.reservation]


def golden(workflow: str) -> list[str]:
    lines = GOLDEN.read_text().splitlines()
    return [line for line in lines if json.loads(line)["workflow"] == workflow]


def test_the_examples_golden_histories_replay_against_their_code() -> None:
    results = wayline.testing.replay(GOLDEN, EXAMPLES)
    assert [r.verdict for r in results] == ["ok"] * 4
    assert {r.workflow for r in results} == {w.name for w in EXAMPLES}


# A second `examples.expense` that sleeps before its first approval: the same steps (none),
# so the same identity, but a log entry the recorded run does not have at that point.
@wayline.workflow(name="examples.expense")
async def expense_that_sleeps_first(claim_id: str, amount: int) -> list[str]:
    await wayline.sleep("1s")
    approval = await Approval.wait(f"expense:{claim_id}", timeout="7d")
    return [approval.by]


def test_a_reordered_workflow_diverges_with_the_message_a_worker_records() -> None:
    [result] = wayline.testing.replay(
        golden("examples.expense"), [expense_that_sleeps_first], raise_on_failure=False
    )
    assert result.verdict == "diverged"
    assert result.message.startswith("replay divergence at seq ")
    with pytest.raises(wayline.ReplayDivergenceError, match="diverged") as raised:
        wayline.testing.replay(golden("examples.expense"), [expense_that_sleeps_first])
    assert raised.value.details["result"] is not None


@wayline.workflow(name="examples.reservation")
async def reservation_twice(sku: str) -> str:
    first = await retry_policy.reserve(sku)
    return first + await retry_policy.reserve(sku)  # same step, same identity: one call more


def test_a_workflow_that_asks_for_more_after_its_recorded_end_diverges() -> None:
    ok_run = golden("examples.reservation")[0]
    [result] = wayline.testing.replay([ok_run], [reservation_twice], raise_on_failure=False)
    assert result.verdict == "diverged"
    assert "expected the run's end, got step 'examples.reserve'" in result.message


@wayline.step(name="examples.audit")
def audit(trip: str) -> None:
    """A step the recorded trip never referred to."""


@wayline.workflow(name="examples.trip")
async def trip_with_audit(trip: str) -> str:
    await audit(trip)
    return await trip_saga.book_flight(trip)


def test_a_changed_definition_identity_is_reported_as_not_served() -> None:
    [result] = wayline.testing.replay(
        golden("examples.trip"), [trip_with_audit], raise_on_failure=False
    )
    assert result.verdict == "not served"
    assert "pinned to identity" in result.message


def test_a_history_of_a_workflow_not_given_is_named() -> None:
    [result] = wayline.testing.replay(
        golden("examples.trip"), [retry_policy.reservation], raise_on_failure=False
    )
    assert result.verdict == "unknown workflow"
    assert "'examples.trip'" in result.message and "examples.reservation" in result.message


def _line(change: Any) -> str:
    raw = json.loads(golden("examples.reservation")[0])
    change(raw)
    return json.dumps(raw)


@pytest.mark.parametrize(
    ("line", "said"),
    [
        ("not json", "not JSON"),
        ('{"format": "other"}', "not a Wayline history"),
        ('{"format": "wayline-history/1", "runId": 1}', "needs a runId"),
        (_line(lambda h: h["events"][1].update(seq=7)), "event 2 has seq 7"),
        (_line(lambda h: h["events"][0].update(type="nope")), "unknown event type 'nope'"),
        (_line(lambda h: h["events"][0].update(data=[])), "data must be an object"),
        (_line(lambda h: h["events"][2].update(createdAt="x")), "createdAt must be a number"),
    ],
)
def test_a_line_that_is_not_a_history_is_refused_naming_where(line: str, said: str) -> None:
    with pytest.raises(ValueError, match=said) as raised:
        parse_history(line, "histories.jsonl:3")
    assert str(raised.value).startswith("histories.jsonl:3")
