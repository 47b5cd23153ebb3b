"""Priority of ready work across runs: a worker takes the runs started with a lower
priority number first, whatever order they were queued in; a child runs at its
parent's priority; and a priority no run can have is refused before anything is written."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import wayline
from tests.runtime.harness import Engine
from tests.runtime.ordering_harness import prioritised_engine, record_starts
from wayline._core.ordering import Ordering

__all__ = ["prioritised_engine"]


@wayline.workflow(name="priority_tests.labelled")
async def labelled(label: str) -> str:
    return label


@wayline.workflow(name="priority_tests.kid")
async def kid(label: str) -> str:
    return label


@wayline.workflow(name="priority_tests.parent")
async def parent(label: str) -> str:
    return await wayline.child(kid, label)


@wayline.workflow(name="priority_tests.parent_of_urgent")
async def parent_of_urgent(label: str) -> str:
    return await wayline.child_with(wayline.ChildOptions(priority=0), kid, label)


async def test_urgent_runs_queued_last_start_first(prioritised_engine: Engine) -> None:
    client = prioritised_engine.client
    labels: dict[str, str] = {}
    for i in range(6):
        handle = await client.start_with(wayline.StartOptions(priority=8), labelled, f"low{i}")
        labels[handle.run_id] = f"low{i}"
    for i in range(2):
        handle = await client.start_with(wayline.StartOptions(priority=1), labelled, f"high{i}")
        labels[handle.run_id] = f"high{i}"
    started = record_starts(prioritised_engine.world)
    async with prioritised_engine.worker([labelled]):
        for run_id, label in labels.items():
            assert await client.handle(run_id).result(timeout=30) == label
    order = [labels[run_id] for run_id in started]
    assert order == ["high0", "high1", *(f"low{i}" for i in range(6))]


async def test_a_run_that_waited_long_enough_starts_before_newer_urgent_runs(
    prioritised_engine: Engine,
) -> None:
    """Aging: nine aging periods lift a priority-9 start to level 0, so it goes first."""
    world = await prioritised_engine.make_world(aging_seconds=0.05)
    client = wayline.Client(world)
    patient = await client.start_with(wayline.StartOptions(priority=9), labelled, "patient")
    await asyncio.sleep(0.05 * 9 + 0.3)
    labels = {patient.run_id: "patient"}
    for i in range(3):
        handle = await client.start_with(wayline.StartOptions(priority=0), labelled, f"urgent{i}")
        labels[handle.run_id] = f"urgent{i}"
    started = record_starts(world)
    async with prioritised_engine.worker([labelled], world=world):
        for run_id, label in labels.items():
            assert await client.handle(run_id).result(timeout=30) == label
    assert [labels[run_id] for run_id in started] == ["patient", "urgent0", "urgent1", "urgent2"]


@pytest.mark.parametrize(
    ("parent_workflow", "expected"),
    [
        # a child runs at its parent's priority and fairness key
        (parent, Ordering(priority=2, fairness_key="acme")),
        # ChildOptions(priority=) gives it its own priority; the key stays its parent's
        (parent_of_urgent, Ordering(priority=0, fairness_key="acme")),
    ],
)
async def test_a_childs_priority_and_fairness_key(
    prioritised_engine: Engine, parent_workflow: Any, expected: Ordering
) -> None:
    client = prioritised_engine.client
    options = wayline.StartOptions(priority=2, fairness_key="acme")
    async with prioritised_engine.worker([parent_workflow, kid]):
        handle = await client.start_with(options, parent_workflow, "x")
        assert await handle.result(timeout=30) == "x"
    [child] = await client.list_runs(workflow="priority_tests.kid")
    assert child.attributes["parent"]["runId"] == handle.run_id
    assert child.ordering == expected
    assert (await client.get_run(handle.run_id)).ordering.fairness_key == "acme"


def test_a_child_priority_out_of_bounds_is_refused() -> None:
    with pytest.raises(ValueError, match="priority is 0 \\(served first\\) to 9, not 12"):
        wayline.ChildOptions(priority=12)


@pytest.mark.parametrize(
    ("options", "says"),
    [
        ({"priority": 10}, "priority is 0 (served first) to 9, not 10"),
        ({"priority": -1}, "priority is 0 (served first) to 9, not -1"),
        ({"priority": "1"}, "priority is an integer, not '1'"),
        ({"priority": True}, "priority is an integer, not True"),
        ({"fairness_key": ""}, "fairness_key is a non-empty string, not ''"),
        ({"fairness_key": "x" * 257}, "fairness_key has at most 256 characters, not 257"),
        ({"fairness_weight": 0}, "fairness_weight is 1 to 100, not 0"),
        ({"fairness_weight": 3}, "fairness_weight weighs a fairness_key: give one too"),
    ],
)
def test_a_priority_or_fairness_no_run_can_have_is_refused(
    options: dict[str, object], says: str
) -> None:
    with pytest.raises(ValueError, match=says.replace("(", r"\(").replace(")", r"\)")):
        wayline.StartOptions(**options)  # type: ignore[arg-type]
