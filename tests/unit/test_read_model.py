"""The operator reads runs through the public read model (``wayline.history``), the public
cron (``wayline.cron``) and the shared argument parsing (``wayline.arguments``), never through
the runtime's internals: the exports are pinned here, and an import-linter contract forbids
``wayline_operator`` to import ``wayline._core``, ``wayline._engine`` or ``wayline.cli``."""

from __future__ import annotations

import argparse
import ast
from pathlib import Path

import pytest

import wayline.arguments
import wayline.cron
import wayline.history
from wayline._core.events import EventType, NewEvent
from wayline.cli import timeline

OPERATOR = Path(__file__).resolve().parents[2] / "operator" / "wayline_operator"


def test_the_read_model_exports_are_pinned() -> None:
    assert sorted(wayline.history.__all__) == sorted(
        [
            "PAUSABLE",
            "Action",
            "Event",
            "EventType",
            "RunInfo",
            "RunStatus",
            "RunView",
            "StepState",
            "debounced_until",
            "decide",
            "fmt_error",
            "fold",
            "is_run_id",
            "lease_remaining",
            "waiting_for_worker",
        ]
    )
    assert sorted(wayline.cron.__all__) == ["Cron", "CronError", "due", "next_tick", "parse"]
    assert sorted(wayline.arguments.__all__) == [
        "UsageParser",
        "port_arg",
        "range_arg",
        "whole_arg",
    ]


def test_the_cli_and_the_operator_render_an_error_with_one_function() -> None:
    assert timeline.fmt_error is wayline.history.fmt_error
    error = {"name": "ValueError", "message": "no such order", "code": "USER_ERROR"}
    assert wayline.history.fmt_error(error) == "ValueError: no such order"


def test_a_run_folds_from_its_events_through_the_read_model() -> None:
    created = NewEvent(EventType.RUN_CREATED, data={"workflow": "read-model", "input": []})
    event = wayline.history.Event(
        run_id="wf_" + "0" * 32,
        seq=1,
        type=created.type,
        correlation_id=None,
        data=created.data,
        created_at=1.0,
    )
    view = wayline.history.fold(event.run_id, [event])
    assert view.run is not None and view.run.workflow == "read-model"
    assert view.run.status is wayline.history.RunStatus.PENDING
    assert view.status == "pending"


def test_the_shared_argument_types_refuse_bad_input() -> None:
    assert wayline.arguments.port_arg("8080") == 8080
    with pytest.raises(argparse.ArgumentTypeError, match="a port is 0 to 65535"):
        wayline.arguments.port_arg("70000")
    with pytest.raises(argparse.ArgumentTypeError, match="must be 1 to 5"):
        wayline.arguments.range_arg(1, 5)("9")


def test_no_operator_module_imports_the_runtime_internals() -> None:
    """What the import-linter contract says, checked without it: a direct import only."""
    forbidden = ("wayline._core", "wayline._engine", "wayline.cli")
    found = []
    for path in sorted(OPERATOR.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            found += [f"{path.name}: {n}" for n in names if n.startswith(forbidden)]
    assert found == []
