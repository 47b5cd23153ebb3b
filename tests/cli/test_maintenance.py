"""``wayline recover``, ``cleanup``, ``archive`` and ``runs repair`` through the CLI, and their bad
input."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable

from tests.cli.conftest import FLOWS, Background, Cli
from tests.hostile.poison import forge_event
from wayline.world import open_world


def _finished_run(cli: Cli) -> str:
    done = cli.here("run", f"{FLOWS}:add", "--input", "[1, 2]")
    assert done.returncode == 0, done.stderr
    [run] = [r for r in cli.json("runs", "list") if r["status"] == "completed"][:1]
    return str(run["run_id"] if "run_id" in run else run["runId"])


def test_recover_prints_the_counts(cli: Cli) -> None:
    started = cli.here("start", f"{FLOWS}:approval", "--input", '"T-1"')
    assert started.returncode == 0, started.stderr
    done = cli.here("recover", "--app", str(FLOWS))
    assert done.returncode == 0, done.stderr
    counts = json.loads(done.stdout)
    assert counts["total"] == 1 and counts["running"] == 1
    assert counts["rearmed"] == 0  # its start message is still queued: its wake is coming
    assert set(counts) == {"running", "waiting", "compensating", "orphans", "total", "rearmed"}


def test_recover_with_an_app_that_defines_no_workflow_is_refused(cli: Cli) -> None:
    """``--app`` narrows recovery to the app's workflows: a module with none (a typo'd file, a
    helper module) is refused as ``wayline worker --app`` refuses it, not read as "every
    run"."""
    started = cli.here("start", f"{FLOWS}:approval", "--input", '"T-2"')
    assert started.returncode == 0, started.stderr
    empty = cli.cwd / "helpers.py"
    empty.write_text("TIMEOUT = 5\n")
    done = cli.here("recover", "--app", str(empty))
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert done.stdout == "" and "Traceback" not in done.stderr, done.stdout
    assert "defines no workflow" in done.stderr and "helpers.py" in done.stderr, done.stderr


def test_cleanup_and_archive(cli: Cli) -> None:
    first = _finished_run(cli)
    _finished_run(cli)
    kept = cli.here("cleanup", "--older-than", "7d")
    assert kept.returncode == 0 and "deleted 0 runs" in kept.stdout
    moved = cli.here("archive", "--older-than", "0")
    assert moved.returncode == 0, moved.stderr
    assert "archived 2 runs (2 in the archive)" in moved.stdout
    assert cli.here("archive", "--count").stdout.strip() == "2"
    assert cli.json("runs", "list") == []
    shown = cli.here("runs", "show", first)  # not "no such run" alone: it may be in the archive
    assert shown.returncode == 2 and "2 ended runs are archived" in shown.stderr
    _finished_run(cli)
    gone = cli.here("cleanup", "--older-than", "0", "--status", "completed")
    assert gone.returncode == 0 and "deleted 1 run" in gone.stdout


def test_maintenance_bad_input(cli: Cli) -> None:
    _finished_run(cli)
    for args, fragment in [
        (["cleanup", "--older-than", "soon"], "duration"),
        (["cleanup"], "--older-than"),
        (["cleanup", "--older-than", "1d", "--status", "running"], "invalid choice"),
        (["archive"], "--older-than"),
        (["archive", "--older-than", "0", "--count"], "archives nothing"),  # not ignored
        (["recover", "--app", "no_such_module_xyz"], "no_such_module_xyz"),
    ]:
        done = cli.here(*args)  # a missing --app module registers nothing: in-process too
        assert done.returncode == 2, (args, done.stdout, done.stderr)
        assert fragment in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert len(cli.json("runs", "list")) == 1  # nothing lost


async def _forge_step(url: str, run_id: str) -> int:
    world = open_world(url)
    await world.start()
    try:
        return await forge_event(world, run_id, "step_completed", {"output": 0}, cid="s-forged")
    finally:
        await world.close()


def test_runs_repair_removes_an_entry_that_does_not_follow(
    cli: Cli, spawn: Callable[..., Background], world_url: str
) -> None:
    """A decodable entry that does not follow (a step result for a step never created): ``runs
    show`` names it and the command, ``runs repair --drop-seq`` of another entry exits 2 naming
    where the log first fails, of this one removes it, and a worker completes the run."""
    started = cli.here("start", f"{FLOWS}:add", "--input", "[1, 2]")
    assert started.returncode == 0, started.stderr
    run_id = started.stdout.strip().split()[-1]
    seq = asyncio.run(_forge_step(world_url, run_id))
    shown = cli.here("runs", "show", run_id)
    assert shown.returncode == 2, shown.stdout
    assert "CORRUPT_LOG" in shown.stderr
    assert f"runs repair {run_id} --drop-seq {seq}" in shown.stderr
    refused = cli.here("runs", "repair", run_id, "--drop-seq", str(seq - 1))
    assert refused.returncode == 2 and f"first fails at entry {seq}" in refused.stderr
    assert "Traceback" not in refused.stderr
    done = cli.here("runs", "repair", run_id, "--drop-seq", str(seq))
    assert done.returncode == 0, done.stderr
    assert f" {seq}" in done.stdout and "woke the run" in done.stdout
    spawn("worker", "--app", str(FLOWS), "--processes", "1")
    finished = cli.wait_status(run_id, "completed", timeout=30)
    assert finished["output"] == {"sum": 3, "doubled": 6}
