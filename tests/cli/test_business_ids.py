"""``wayline start --id`` and the business id in place of a run id in ``wayline runs``, on
SQLite and on NATS, in-process (no worker: ``runs terminate`` ends a run)."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from wayline._core.ids import is_run_id

from .conftest import InProcess, in_process

Run = InProcess
START = ["start", "bid_app.py", "--input", '"bob"']  # a file alone: its one workflow


@pytest.fixture
def run(
    world_url: str,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> Run:
    """``run(*argv)`` in a directory holding an app whose one workflow is named anew."""
    source = (
        "import wayline\n\n\n"
        "@wayline.workflow\n"
        f"async def greet_{uuid.uuid4().hex[:12]}(name: str) -> str:\n"
        "    return name\n"
    )
    return in_process(world_url, capsys, tmp_path, monkeypatch, ("bid_app.py", source))


def _one_error_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    return lines[0]


def test_start_by_id_and_the_runs_commands_by_it(run: Run) -> None:
    code, out, err = run(*START, "--id", "order-123")
    first = out.strip()
    assert code == 0 and is_run_id(first), err
    assert run(*START, "--id", "order-123")[1].strip() == first  # use_existing
    code, _, err = run(*START, "--id", "order-123", "--id-conflict", "fail")
    assert code == 1 and first in _one_error_line(err) and "(pending)" in err

    code, out, _ = run("runs", "show", "order-123")
    assert code == 0 and f"run       {first}\nid        order-123\n" in out
    code, out, _ = run("runs", "show", "order-123", "--json")
    shown = json.loads(out)
    assert (shown["runId"], shown["businessId"]) == (first, "order-123")
    code, out, _ = run("runs", "list")
    header, row = out.splitlines()
    assert header.split()[:3] == ["RUN", "ID", "ID"] and row.split()[:2] == [first, "order-123"]

    code, out, _ = run("runs", "terminate", "order-123")
    assert (code, out.strip()) == (0, f"terminated {first} (no compensations ran)")
    assert run(*START, "--id", "order-123")[1].strip() == first  # reject_duplicate
    code, out, _ = run(*START, "--id", "order-123", "--id-reuse", "allow_duplicate")
    second = out.strip()
    assert code == 0 and is_run_id(second) and second != first
    assert json.loads(run("runs", "show", "order-123", "--json")[1])["runId"] == second
    old = json.loads(run("runs", "show", first, "--json")[1])
    assert (old["status"], old["businessId"]) == ("cancelled", "order-123")
    code, out, _ = run("runs", "cancel", "order-123")
    assert code == 0 and out.startswith(f"cancel requested for {second} ")


def test_a_business_id_of_a_namespace_is_found_with_its_namespace(run: Run) -> None:
    code, out, err = run(*START, "--id", "order-9", "--namespace", "team-a")
    assert code == 0, err
    code, _, err = run("runs", "show", "order-9")
    assert code == 2 and "no run 'order-9'" in _one_error_line(err)
    code, shown, _ = run("runs", "show", "order-9", "--namespace", "team-a", "--json")
    assert code == 0 and json.loads(shown)["runId"] == out.strip()


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        ([*START, "--id", ""], "argument --id: an id has 1 to 256 characters"),
        ([*START, "--id", "a" * 257], "argument --id: an id has 1 to 256 characters"),
        ([*START, "--id", "wf_" + "a" * 32], "is a run id; start it with run_id="),
        ([*START, "--id", "x", "--id-reuse", "always"], "argument --id-reuse: invalid choice"),
        (["runs", "show", "order\t1"], "argument RUN_ID: an id has printable characters only"),
        (["runs", "cancel", " order-1"], "neither starts nor ends with a space"),
    ],
    ids=["empty", "too-long", "run-id", "policy", "tab", "space"],
)
def test_a_bad_id_is_one_error_line_and_exit_2(run: Run, argv: list[str], said: str) -> None:
    code, out, err = run(*argv)
    assert code == 2 and said in _one_error_line(err) and out == ""
    assert run("runs", "list")[1].strip() in ("no runs", "")
