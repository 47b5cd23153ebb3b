"""The pure rules of fork and redrive, on hand-built logs: which events a fork carries (a
step that ended keeps its history, one still open only its creation, a pending sleep its
creation; an open hook or child refuses the fork), and which failures a redrive undoes."""

from __future__ import annotations

from typing import Any

import pytest

from wayline._core.events import Event, EventType
from wayline._core.forks import fork_point, forked_history, parse_step
from wayline._core.redrives import redriven_failures
from wayline.errors import ForkRefusedError

_RUN = "wf_" + "0" * 32


def _log(*entries: tuple[EventType, str | None, dict[str, Any]]) -> list[Event]:
    return [Event(_RUN, i, t, cid, data, float(i)) for i, (t, cid, data) in enumerate(entries, 1)]


def _step(cid: str, name: str, occurrence: int) -> tuple[EventType, str, dict[str, Any]]:
    return (EventType.STEP_CREATED, cid, {"stepName": name, "occurrence": occurrence})


_BASE = (
    (EventType.RUN_CREATED, None, {"workflow": "w", "input": {"args": []}}),
    (EventType.RUN_STARTED, None, {}),
    _step("s1", "a", 0),
    _step("s2", "b", 0),  # b runs beside a, and is still open when c is called
    (EventType.STEP_COMPLETED, "s1", {"result": 1}),
    (EventType.WAIT_CREATED, "w1", {"resumeAt": 99.0}),
)


def test_a_fork_keeps_what_ended_whole_and_only_the_creation_of_what_is_open() -> None:
    events = _log(*_BASE, _step("s3", "c", 0), (EventType.STEP_COMPLETED, "s2", {"result": 2}))
    point = fork_point(_RUN, events, "c")
    assert (point.step_id, point.seq) == ("s3", 7)
    carried = forked_history(_RUN, events, point, {"workflow": "w"}, None)
    assert [(e.type, e.correlation_id) for e in carried] == [
        (EventType.RUN_CREATED, None),
        (EventType.RUN_STARTED, None),
        (EventType.STEP_CREATED, "s1"),
        (EventType.STEP_CREATED, "s2"),
        (EventType.STEP_COMPLETED, "s1"),
        (EventType.WAIT_CREATED, "w1"),  # pending: it fires in the fork when it falls due
        (EventType.STEP_COMPLETED, "s2"),  # ended after the fork point: carried, in order
    ]


@pytest.mark.parametrize(
    ("entity", "refusal"),
    [
        ((EventType.HOOK_CREATED, "h1", {"token": "t"}), "hook h1 .* is still open"),
        ((EventType.CHILD_CREATED, "c1", {"childRunId": "x"}), "child c1 .* has not ended"),
    ],
)
def test_an_open_hook_or_child_before_the_fork_point_refuses_the_fork(
    entity: tuple[EventType, str, dict[str, Any]], refusal: str
) -> None:
    events = _log(*_BASE, entity, _step("s3", "c", 0))
    with pytest.raises(ForkRefusedError, match=refusal):
        forked_history(_RUN, events, fork_point(_RUN, events, "c"), {}, None)


def test_a_hook_of_an_ended_run_is_carried_with_its_disposal() -> None:
    hook = (EventType.HOOK_CREATED, "h1", {"token": "t"})
    answered = (EventType.HOOK_RECEIVED, "h1", {"payload": "yes"})
    events = _log(*_BASE, hook, answered, _step("s3", "c", 0))
    point = fork_point(_RUN, events, "c")
    carried = forked_history(_RUN, events, point, {}, None, ended=True)
    assert [(e.type, e.correlation_id) for e in carried[-3:]] == [
        (EventType.HOOK_CREATED, "h1"),
        (EventType.HOOK_RECEIVED, "h1"),
        (EventType.HOOK_DISPOSED, "h1"),  # the old run's end freed its token
    ]


def test_a_step_is_named_with_its_occurrence_counted_from_one() -> None:
    assert parse_step("charge") == ("charge", 1)
    assert parse_step("billing#charge#2") == ("billing#charge", 2)
    for bad in ("charge#0", "charge#x", "#2"):
        with pytest.raises(ForkRefusedError, match="NAME#N"):
            parse_step(bad)


def test_a_redrive_undoes_the_latest_failure_of_its_step_before_it() -> None:
    events = _log(
        (EventType.STEP_FAILED, "s1", {}),
        (EventType.RUN_REDRIVEN, "s1", {}),
        (EventType.STEP_FAILED, "s1", {}),
        (EventType.STEP_FAILED, "s2", {}),
        (EventType.RUN_REDRIVEN, "s1", {}),
    )
    assert redriven_failures(events) == {1, 3}  # s2's failure stands
