"""What ``wayline runs show`` says beyond a run's status, on both worlds: a step whose body
started and recorded no outcome (its worker killed), the ids ``runs wake --wait`` takes, and a
run ended by ``runs terminate``."""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from datetime import datetime

import pytest

from .conftest import FLOWS, Background, Cli

pytestmark = pytest.mark.timeout(120)  # a hang guard on a loaded machine, not a timing


def _wait_json(cli: Cli, run_id: str, ready: Callable[[dict[str, object]], bool]) -> None:
    deadline = time.monotonic() + 30
    while not ready(shown := cli.json("runs", "show", run_id)):
        assert time.monotonic() < deadline, shown
        time.sleep(0.1)


def _started_with_a_worker(
    cli: Cli, spawn: Callable[..., Background], target: str, given: str
) -> tuple[str, Background]:
    started = cli.here("start", f"{FLOWS}:{target}", "--input", given)
    assert started.returncode == 0, started.stderr
    return started.stdout.strip(), spawn("worker", "--app", str(FLOWS), "--processes", "1")


def test_a_step_whose_worker_was_killed_is_shown_waiting_for_its_redelivery(
    cli: Cli, spawn: Callable[..., Background], world_url: str
) -> None:
    run_id, worker = _started_with_a_worker(cli, spawn, "lingering", "300")
    _wait_json(cli, run_id, lambda s: [x["status"] for x in s["steps"]] == ["running"])  # type: ignore[index,union-attr]
    worker.stop(signal.SIGKILL)

    before = time.time()
    shown = cli.here("runs", "show", run_id)
    after = time.time()
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert any(ln.strip().startswith("attempt 1: running (started +") for ln in lines), lines
    [why] = [ln for ln in lines if "no outcome recorded yet" in ln]
    assert "waits for the worker that holds it; if that worker died, a redelivery runs it " in why
    assert "again, due by " in why
    # the bound is the visibility (30 s) from the moment of the show, not the owner's lease
    # (minutes): a redelivery of the dead holder's own message runs the body again at once
    due = datetime.strptime(why.split("due by ")[1], "%Y-%m-%d %H:%M:%S").timestamp()
    assert before + 30 - 1 <= due <= after + 30 + 1, (why, before, after)  # shown to the second
    assert any("the world redelivers a step 30.00 s after" in ln for ln in lines), lines

    # terminated: the run ends cancelled, and show says it was terminate that ended it
    assert cli.here("runs", "terminate", run_id, "--reason", "stop it").returncode == 0
    text = cli.here("runs", "show", run_id).stdout
    assert "status    cancelled (terminated: no compensations ran)" in text
    assert "run cancelled by terminate (no compensations ran)" in text
    assert "no outcome recorded yet" not in text  # the run ended: nothing waits any more
    as_json = cli.json("runs", "show", run_id)
    assert as_json["status"] == "cancelled" and as_json["terminated"] is True
    assert as_json["error"]["code"] == "RUN_CANCELLED"


def test_runs_show_names_the_ids_runs_wake_takes(
    cli: Cli, spawn: Callable[..., Background], world_url: str
) -> None:
    run_id, _ = _started_with_a_worker(cli, spawn, "approval", '"t-5"')
    _wait_json(cli, run_id, lambda s: bool(s["hooks"]))
    text = cli.here("runs", "show", run_id).stdout
    assert "hook approve:t-5 (id h1)" in text
    assert "(wait id h1.timeout)" in text
    assert "waiting   for hook approve:t-5 (id h1)" in text
    woke = cli.here("runs", "wake", run_id, "--wait", "h1.timeout")  # the id as show printed it
    assert woke.returncode == 0, woke.stderr
    assert woke.stdout.strip() == f"woke h1.timeout of {run_id}"
    _wait_json(cli, run_id, lambda s: s["status"] == "failed")
    assert "cancelled (terminated" not in cli.here("runs", "show", run_id).stdout
