"""The unpause's status check, rewritten for the mypyc build (5fe10b0: a list instead of a
starred generator in a tuple), decides as the check before it did for every recorded status,
on a proposed event and a stored one alike (``apply_transition`` takes both since)."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from wayline._core.events import (
    PAUSABLE,
    STATUS_AFTER,
    Event,
    EventType,
    NewEvent,
    RunStatus,
    apply_transition,
)
from wayline.errors import EntityConflictError


def _before_5fe10b0(after: Any) -> RunStatus:
    """The check as it was at 5fe10b0^1, kept verbatim as the reference."""
    if after not in (None, *(str(s) for s in PAUSABLE)):
        raise EntityConflictError(f"an unpause returns a run to pending or running, not {after}")
    return RunStatus(after) if isinstance(after, str) else RunStatus.RUNNING


def _outcome(decide: Any) -> tuple[str, str]:
    try:
        return "status", repr(decide())
    except EntityConflictError as err:
        return "refused", str(err)


RECORDED = st.one_of(
    st.none(),
    st.sampled_from([str(s) for s in RunStatus]),
    st.sampled_from(list(RunStatus)),
    st.text(max_size=12),
    st.integers(),
    st.floats(allow_nan=True),
    st.booleans(),
    st.lists(st.sampled_from(["pending", "running", None]), max_size=2),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)


@given(after=RECORDED, keyless=st.booleans(), stored=st.booleans())
def test_the_unpause_check_decides_as_before(after: Any, keyless: bool, stored: bool) -> None:
    data = {} if keyless else {STATUS_AFTER: after}
    event: NewEvent | Event = NewEvent(EventType.RUN_UNPAUSED, data=data)
    if stored:
        event = Event("wf_unpause_check", 7, EventType.RUN_UNPAUSED, None, data, 0.0)
    expected = _outcome(lambda: _before_5fe10b0(None if keyless else after))
    now = _outcome(lambda: apply_transition(RunStatus.PAUSED, None, event)[0])
    assert now == expected
