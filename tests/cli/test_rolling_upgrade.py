"""Rolling upgrades with real ``wayline worker`` processes (both worlds): workers of a new
version of an application replace those of the old one while runs sleep, hold a step, or wait
for a child that another application serves. Every body writes a line to a marker file, so
how many times each ran survives the processes that ran it."""

from __future__ import annotations

import json
import signal
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.cli.conftest import Background, Cli

STEPS = """
import time
import wayline


def mark(path: str, text: str) -> None:
    with open(path, "a") as f:
        f.write(text + "\\n")


@wayline.step
def up_a(path: str, tag: str, hold: float) -> str:
    mark(path, f"a-start {tag}")
    time.sleep(hold)
    mark(path, f"a-end {tag}")
    return tag


@wayline.step
def up_b(path: str, tag: str) -> str:
    mark(path, f"b {tag}")
    return tag.upper()


@wayline.step
def up_c(path: str, tag: str) -> str:
    mark(path, f"c {tag}")
    return tag
"""

# v1 and v2 have the same shape (same steps, same options): only the code differs
V1 = (
    STEPS
    + """

@wayline.workflow
async def up_flow(path: str, tag: str, hold: float, nap: float) -> str:
    a = await up_a(path, tag, hold)
    await wayline.sleep(nap)
    return "v1:" + await up_b(path, a)
"""
)

V2_CODE = (
    STEPS
    + """

@wayline.workflow
async def up_flow(path: str, tag: str, hold: float, nap: float) -> str:
    first = await up_a(path, tag, hold)
    await wayline.sleep(nap)
    second = await up_b(path, first)
    return f"v2:{second}"
"""
)

# a step added after the sleep: another shape
V2_SHAPE = (
    STEPS
    + """

@wayline.workflow
async def up_flow(path: str, tag: str, hold: float, nap: float) -> str:
    a = await up_a(path, tag, hold)
    await wayline.sleep(nap)
    await up_c(path, a)
    return "v2:" + await up_b(path, a)
"""
)

# the workflow removed, another one in its place
V2_GONE = (
    STEPS
    + """

@wayline.workflow
async def up_other(path: str, tag: str) -> str:
    return await up_c(path, tag)
"""
)


def _app(tmp_path: Path, name: str, source: str) -> str:
    where = tmp_path / name
    where.mkdir()
    path = where / "upapp.py"
    path.write_text(textwrap.dedent(source))
    return str(path)


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def _until(check: Callable[[], bool], timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "condition not met"
        time.sleep(0.05)


def _start(cli: Cli, workflow: str, *args: Any) -> str:
    done = cli("start", workflow, "--input", json.dumps(list(args)))
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def _show(cli: Cli, run_id: str) -> Any:
    """``runs show --json`` in a process of its own, not ``Cli.json``: read in the test's
    process after the suite's other tests there, the run's waitingForWorker stayed empty for
    30 s (the cause is not found yet; docs/testing.md)."""
    done = cli("runs", "show", run_id, "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def _worker(spawn: Callable[..., Background], app: str) -> Background:
    bg = spawn("worker", "--app", app, "--processes", "1")
    bg.wait_for("ready", timeout=30)
    return bg


def test_a_code_change_reaches_runs_mid_sleep_and_mid_step_through_a_rolling_upgrade(
    cli: Cli, world_url: str, spawn: Callable[..., Background], tmp_path: Path
) -> None:
    """Two v1 workers; one is SIGKILLed while it runs a step, the other stopped with SIGTERM
    while runs sleep; two v2 workers (same shape, other code) finish every run: each step
    after the kill ran once, none is lost, and the result is v2's."""
    cli.env["WAYLINE_VISIBILITY_SECONDS"] = "2"
    marker = tmp_path / "m"
    v1, v2 = _app(tmp_path, "v1", V1), _app(tmp_path, "v2", V2_CODE)
    old = [_worker(spawn, v1), _worker(spawn, v1)]
    _start(cli, "up_flow", str(marker), "held", 30.0, 0.0)
    _until(lambda: "a-start held" in _lines(marker))
    # the sleeps outlast the three starts and the kills on a loaded machine: no v1 worker may
    # reach a step after them (a wake it took before its SIGTERM, it would drive on)
    asleep = [_start(cli, "up_flow", str(marker), f"s{i}", 0.0, 8.0) for i in range(3)]
    _until(lambda: all(f"a-end s{i}" in _lines(marker) for i in range(3)))
    # a body's last line is written before its completion is: killed in between, the step
    # would rightly run again, so the kill waits until each run's sleep is recorded
    _until(lambda: all(cli.json("runs", "show", run_id)["waits"] for run_id in asleep))
    old[0].stop(signal.SIGKILL)
    old[1].stop(signal.SIGTERM)  # a drain of the long step ends in SIGKILL after 10 s
    assert not [line for line in _lines(marker) if line.startswith("b ")], "slept too little"
    new = [_worker(spawn, v2), _worker(spawn, v2)]
    for i, run_id in enumerate(asleep):
        assert cli.wait_status(run_id, "completed", timeout=60)["output"] == f"v2:S{i}"
    seen = _lines(marker)
    for i in range(3):
        assert seen.count(f"a-start s{i}") == 1 and seen.count(f"b s{i}") == 1, seen
    # the held step was cut by the kill: it runs again, once, on v2
    _until(lambda: _lines(marker).count("a-start held") == 2, timeout=60)
    assert new[0].proc.poll() is None and new[1].proc.poll() is None


def test_a_changed_shape_leaves_old_runs_waiting_visibly_until_an_old_worker_returns(
    cli: Cli, world_url: str, spawn: Callable[..., Background], tmp_path: Path
) -> None:
    """v2 adds a step: runs pinned to v1 are never driven by v2 workers (not even re-armed
    by their start), say which worker they wait for, and finish on a v1 worker brought
    back; runs started meanwhile go to v2. A v2 without the workflow at all: the same."""
    marker = tmp_path / "m"
    v1 = _app(tmp_path, "v1", V1)
    v2 = _app(tmp_path, "v2", V2_SHAPE)
    gone = _app(tmp_path, "gone", V2_GONE)
    old = _worker(spawn, v1)
    runs = [_start(cli, "up_flow", str(marker), f"o{i}", 0.0, 2.0) for i in range(2)]
    _until(lambda: all(f"a-end o{i}" in _lines(marker) for i in range(2)))
    assert old.stop(signal.SIGTERM) == 0
    shown_before = [_show(cli, r) for r in runs]
    new = _worker(spawn, v2)
    other = _worker(spawn, gone)
    fresh = _start(cli, "up_flow", str(marker), "n", 0.0, 0.0)
    assert cli.wait_status(fresh, "completed", timeout=30)["output"] == "v2:N"
    time.sleep(2.5)  # the old runs' sleeps (2 s, begun before `old` stopped) are due
    # What the runs say depends on the stopped worker's registry entry: withdrawn as it
    # stopped, or (a withdrawal that did not land on a loaded server) live until its last
    # heartbeat's three periods run out. A read taken once, after a fixed sleep, found the
    # second under load; each run must say it within the bound.
    _until(lambda: all(_show(cli, r)["waitingForWorker"] is not None for r in runs), 60)
    for run_id, before in zip(runs, shown_before, strict=True):
        shown = _show(cli, run_id)  # nobody drove the runs meanwhile
        assert shown["status"] == before["status"]
        assert len(shown["events"]) == len(before["events"]), shown["events"]
        why = shown["waitingForWorker"]
        assert why is not None and "'up_flow'" in why and "revision 1" in why, shown
    text = cli("runs", "show", runs[0])
    assert "waiting_for_worker" in text.stdout, text.stdout
    new.stop(signal.SIGTERM)
    other.stop(signal.SIGTERM)
    back = _worker(spawn, v1)
    for i, run_id in enumerate(runs):
        assert cli.wait_status(run_id, "completed", timeout=30)["output"] == f"v1:O{i}"
    seen = _lines(marker)
    for i in range(2):
        assert seen.count(f"a-start o{i}") == 1 and seen.count(f"b o{i}") == 1, seen
        assert f"c o{i}" not in seen
    back.stop(signal.SIGTERM)
