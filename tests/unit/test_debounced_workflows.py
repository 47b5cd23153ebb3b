"""Whether a workflow is debounced, as the registry tells the operator (which refuses a
WorkflowRun of one): its live workers say, or with none live (a version scaled to zero) the
worker that served it last."""

from __future__ import annotations

from typing import Any

from wayline.world.registry import debounced

NAME = "debounced-workflows.reindex"


def _entry(live_until: float, *, debounce: bool, revision: int = 1) -> dict[str, Any]:
    return {
        "workflow": NAME,
        "revision": revision,
        "liveUntil": live_until,
        **({"debounced": True} if debounce else {}),
    }


def test_a_live_worker_says_whether_its_workflow_is_debounced() -> None:
    assert debounced(NAME, [_entry(20.0, debounce=True)], now=10.0)
    assert not debounced(NAME, [_entry(20.0, debounce=False)], now=10.0)


def test_a_version_scaled_to_zero_still_says_its_workflow_is_debounced() -> None:
    assert debounced(NAME, [_entry(5.0, debounce=True)], now=10.0)


def test_the_worker_that_served_it_last_decides_when_none_is_live() -> None:
    # revision 2 dropped the debounce, then its version scaled to zero too
    served = [_entry(3.0, debounce=True), _entry(6.0, debounce=False, revision=2)]
    assert not debounced(NAME, served, now=10.0)
    assert debounced(NAME, [*reversed(served), _entry(8.0, debounce=True)], now=10.0)


def test_a_live_worker_outweighs_the_ones_gone() -> None:
    served = [_entry(5.0, debounce=True), _entry(20.0, debounce=False, revision=2)]
    assert not debounced(NAME, served, now=10.0)
    assert not debounced("debounced-workflows.never-served", served, now=10.0)
