"""``runs wake`` and ``runs repair`` of a run while live ``wayline worker`` processes drive it
(both worlds): the wake racing the sleep's own timer, and a repair with nothing to repair."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from tests.cli.conftest import Background, Cli
from tests.cli.worker_races import ADV, APP, seen, start, types, until, worker
from tests.runtime import adversarial_flows as af


def test_runs_wake_racing_the_sleeps_own_timer_and_two_workers(
    cli: Cli, world_url: str, spawn: Callable[..., Background], tmp_path: Path
) -> None:
    """``runs wake`` at about the moment the sleep comes due, two workers: the step after the
    sleep runs once (no crash, so exactly once), and every run completes."""
    marker = str(tmp_path / "m")
    w1 = worker(spawn, APP)
    w2 = worker(spawn, APP)
    w1.wait_for("ready", timeout=30)
    w2.wait_for("ready", timeout=30)
    runs = {tag: start(cli, "r2_sleepy", marker, tag, 1.0) for tag in ("a", "b", "c")}
    time.sleep(0.7)  # the race is the subject: the wakes come about when the sleeps are due
    for run_id in runs.values():
        cli.here("runs", "wake", run_id)  # 0 (woke it) or 1 (its timer won): both fine
    for tag, run_id in runs.items():
        assert cli.wait_status(run_id, "completed", timeout=30)["output"] == tag
    marks = seen(marker)
    for tag in runs:
        assert marks.count(f"after-{tag}") == 1, marks


def test_runs_repair_of_a_live_run_beside_its_worker_changes_nothing(
    cli: Cli, world_url: str, spawn: Callable[..., Background], tmp_path: Path
) -> None:
    """Repair with nothing to repair (no --drop-seq) while a worker drives the run and a hook
    waits: the hook still resumes, the run completes once; a --drop-seq of a readable entry
    is refused and removes nothing."""
    marker = str(tmp_path / "m")
    w1 = worker(spawn, ADV)
    w1.wait_for("ready", timeout=30)
    token = f"rep-{marker}"
    run_id = start(cli, "adv_hook_or_timeout", marker, token)
    until(lambda: token in cli.here("hooks", "list", "--json").stdout)
    before = cli.json("runs", "show", run_id)
    refused = cli.here("runs", "repair", run_id, "--drop-seq", "2")
    assert refused.returncode != 0, refused.stdout
    assert types(cli.json("runs", "show", run_id)) == types(before)
    repaired = cli.here("runs", "repair", run_id)
    assert repaired.returncode == 0, repaired.stderr
    done = cli.here("hooks", "resume", token, "--payload", "7")
    assert done.returncode == 0, done.stderr
    shown = cli.wait_status(run_id, "completed", timeout=30)
    assert shown["output"] == "got 7"
    again = cli.here("runs", "repair", run_id)
    assert again.returncode == 0, again.stderr
    time.sleep(0.5)  # a change the repair caused would show by now: nothing to wait for
    assert types(cli.json("runs", "show", run_id)) == types(shown)
    assert af.lines(marker) == [f"{token} got 7"]
