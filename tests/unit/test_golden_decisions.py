"""The pure planner and the decision table over golden histories (``tests/golden/decisions.jsonl``).

Each line is a recorded log cut where one case of the decision table or the planner stands
(seed 000, "The dispatch decision table"; seed 004, "Compensations"; docs/ownership.md), with
the probes it is asked at and the answer the planner gave when it was recorded. The test feeds
the log to a fresh replay of its workflow and asks ``next_move``, ``decision_batch``,
``dispatch_plan`` and ``decide`` again (``tests/golden/planner.py``); a changed answer fails
naming the history and showing the recorded answer against today's. Re-record with
``python tools/record_golden.py`` only on purpose (docs/testing.md).
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

import pytest

import wayline.testing
from tests.golden import planner, workflows
from wayline._core.events import EventType
from wayline._core.histories import History, parse_history

GOLDEN = Path(__file__).resolve().parent.parent / "golden" / "decisions.jsonl"
TOOL = Path(__file__).resolve().parents[2] / "tools" / "record_golden.py"
LINES = [json.loads(line) for line in GOLDEN.read_text(encoding="utf-8").splitlines() if line]


def _history(number: int) -> History:
    text = GOLDEN.read_text(encoding="utf-8").splitlines()[number]
    return parse_history(text, f"{GOLDEN.name}:{number + 1}")


@pytest.mark.parametrize("number", range(len(LINES)), ids=[raw["case"] for raw in LINES])
def test_the_planner_answers_each_golden_history_as_recorded(number: int) -> None:
    raw: dict[str, Any] = LINES[number]
    history = _history(number)
    for probe in raw["probes"]:
        got = planner.observe(history, probe["probe"], raw.get("code"))
        if got != probe["expect"]:
            pytest.fail(planner.difference(raw["case"], probe["expect"], got), pytrace=False)


def test_each_golden_history_is_named_once_and_says_how_it_was_made() -> None:
    names = [raw["case"] for raw in LINES]
    assert len(names) == len(set(names)), "two golden histories share a name"
    assert {raw["recorded"] for raw in LINES} <= {"run", "hand"}
    assert all(raw["why"] and raw["probes"] for raw in LINES)


def test_the_recorded_golden_histories_replay_against_their_workflows() -> None:
    """Every log recorded from a run replays, with no divergence, against the code it was
    recorded with (so a change to ``tests/golden/workflows.py`` shows up here first)."""
    recorded = [
        _history(i) for i, raw in enumerate(LINES) if raw["recorded"] == "run" and "code" not in raw
    ]
    results = wayline.testing.replay(recorded, workflows.WORKFLOWS, raise_on_failure=False)
    assert [str(r) for r in results if not r.ok] == []


REQUIRED = {
    "completed-step-is-not-run-again",
    "owned-step-lease-live-another-delivery-waits",
    "owned-step-the-owners-redelivery-recovers-it",
    "owned-step-lease-expired-before-the-backstop-take-over",
    "owned-step-past-the-backstop-take-over",
    "retry-scheduled-ownership-lapsed",
    "retry-then-a-stamped-start-stays-queue-owned",
    "step-failed-terminally-the-unwind-begins",
    "compensation-failed-the-run-parks",
    "compensation-resumed-tried-again-in-a-new-epoch",
    "compensation-abandoned",
    "hook-delivered-twice-with-one-delivery-id",
    "sleep-not-due-a-wake-is-armed",
    "sleep-due-its-completion-is-written",
    "child-started-the-parent-waits",
    "child-ended-the-parent-goes-on",
    "cancel-mid-step-waits-for-the-owned-body",
    "divergence-the-code-no-longer-matches-the-log",
    "hook-conflict-nothing-to-reverse-fails-at-once",
    "hook-conflict-after-a-step-begins-the-unwind",
    "hook-conflict-with-a-child-running-begins-the-unwind",
    "hook-conflict-over-a-begun-unwind-ends-the-run",
    "hook-conflict-over-an-ended-run-is-done",
    "paused-over-a-step-its-owners-redelivery-is-handed-back",
}
"""The cases of the decision table and the planner the golden file must keep (a re-recording
that drops one fails here)."""


def test_the_golden_file_keeps_every_case_of_the_table() -> None:
    assert REQUIRED - {raw["case"] for raw in LINES} == set()


def test_a_changed_answer_names_the_history_and_shows_old_against_new() -> None:
    raw = next(r for r in LINES if r["case"] == "owned-step-lease-live-another-delivery-waits")
    probe = raw["probes"][0]
    changed = {**probe["expect"], "move": "Finish"}
    said = planner.difference(raw["case"], probe["expect"], changed)
    assert said.startswith("golden history 'owned-step-lease-live-another-delivery-waits'")
    assert '- "move": "Suspend",' in said and '+ "move": "Finish",' in said


def test_a_hook_resumed_twice_under_one_delivery_id_left_one_payload_in_the_log() -> None:
    """The recorder resumed the approval's hook twice under delivery id d-1; the case's log,
    cut from that run, holds the payload once (the world and client deduplicated it)."""
    raw = next(r for r in LINES if r["case"] == "hook-delivered-twice-with-one-delivery-id")
    history = parse_history(json.dumps(raw), raw["case"])
    received = [e.data for e in history.events if e.type is EventType.HOOK_RECEIVED]
    assert received == [{"payload": "yes", "deliveryId": "d-1"}]


def test_the_recorder_and_the_golden_file_name_the_same_cases(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A case added to ``tools/record_golden.py`` and not recorded, or left in the file after
    its case was removed, is named here."""
    spec = importlib.util.spec_from_file_location("record_golden", TOOL)
    assert spec is not None and spec.loader is not None
    recorder = importlib.util.module_from_spec(spec)
    # its dataclasses look their module up by name, and it puts the checkout on sys.path:
    # both are undone when the test ends
    monkeypatch.setitem(sys.modules, "record_golden", recorder)
    monkeypatch.setattr(sys, "path", list(sys.path))
    spec.loader.exec_module(recorder)
    names = [case.name for case in recorder.CASES] + [case.name for case, _ in recorder.HAND]
    assert names == [raw["case"] for raw in LINES]
