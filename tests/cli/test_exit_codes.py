"""The one rule for the exit codes of ``wayline runs``, ``hooks`` and ``schedules`` verbs, on
both worlds: 0 done, 1 nothing to do (the run ended, the wait fired, the hook was answered), 2
refused or bad input (an unknown run, wait, hook token or schedule name). docs/cli.md."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable

import pytest

from .conftest import FLOWS, Background, Cli

SDK_FLOWS = FLOWS.with_name("sdk_flows.py")
MISSING = "wf_" + "0" * 32

pytestmark = pytest.mark.timeout(120)  # a hang guard on a loaded machine, not a timing


def _nothing_to_do(done: subprocess.CompletedProcess[str], *needles: str) -> None:
    assert done.returncode == 1, (done.returncode, done.stdout, done.stderr)
    assert "Traceback" not in done.stderr
    [line] = done.stderr.strip().splitlines()
    for needle in needles:
        assert needle in line, line


def _refused(done: subprocess.CompletedProcess[str]) -> None:
    assert done.returncode == 2, (done.returncode, done.stdout, done.stderr)
    assert "Traceback" not in done.stderr and done.stderr.startswith("error: ")


def test_each_verb_on_an_ended_run_has_nothing_to_do(cli: Cli, world_url: str) -> None:
    done = cli.here("run", f"{FLOWS}:add", "--input", "[1, 2]")
    assert done.returncode == 0, done.stderr
    [ended] = [r["runId"] for r in cli.json("runs", "list")]
    # the codes are the process's own: one real process each for 1 and 2 (0 of a real one:
    # test_cli.py's test_python_dash_m_wayline_is_the_wayline_command); the other verbs run in
    # this process (``Cli.here``), where ``main`` returns the code that ``python -m
    # wayline.cli`` exits with
    _nothing_to_do(cli("runs", "cancel", ended), "nothing to cancel")
    _refused(cli("runs", "cancel", MISSING))
    _nothing_to_do(cli.here("runs", "terminate", ended), "nothing to terminate")
    _nothing_to_do(cli.here("runs", "fail", ended), "nothing to fail")
    _nothing_to_do(cli.here("runs", "wake", ended), "nothing to wake")
    _nothing_to_do(cli.here("runs", "tail", ended, "--stream", "none", "--no-follow"), "nothing in")
    _nothing_to_do(cli.here("runs", "resume-compensation", ended), "nothing to resume")
    _nothing_to_do(cli.here("runs", "abandon-compensation", ended), "nothing to abandon")
    for verb in ["cancel", "terminate", "fail", "wake", "resume-compensation", "show", "watch"]:
        _refused(cli.here("runs", verb, MISSING))

    # a cancelled run (terminated here) is ended too: cancelling it again does nothing
    started = cli.here("start", f"{FLOWS}:approval", "--input", '"t-3"')
    assert started.returncode == 0, started.stderr
    run_id = started.stdout.strip()
    _nothing_to_do(cli.here("runs", "wake", run_id), "no pending sleep")  # a live run, no sleep
    _refused(cli.here("runs", "wake", run_id, "--wait", "w9"))  # a wait it never had
    assert cli.here("runs", "terminate", run_id).returncode == 0
    _nothing_to_do(cli.here("runs", "cancel", run_id), "already ended (cancelled)", "nothing to")


def _until(shown: Callable[[], object], what: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not shown():
        assert time.monotonic() < deadline, f"no {what} within {timeout}s"
        time.sleep(0.1)


def test_a_fired_wait_and_an_answered_hook_are_nothing_to_do(
    cli: Cli, spawn: Callable[..., Background], world_url: str
) -> None:
    started = cli.here("start", f"{SDK_FLOWS}:nap_then_approve", "--input", '"t-4"')
    assert started.returncode == 0, started.stderr
    run_id = started.stdout.strip()
    worker = spawn("worker", "--app", str(SDK_FLOWS), "--processes", "1")
    # Each wait below is bounded from its own start, once the worker is ready: one deadline
    # taken before the worker process started shared its 30 s with the worker's start-up and
    # with every ``runs show`` process, which a loaded machine spent before the hook came. A
    # run that never reaches the wait or the hook still fails at the bound.
    worker.wait_for("ready", timeout=60)
    _until(lambda: cli.json("runs", "show", run_id)["waits"], "the run's nap")
    assert cli.here("runs", "wake", run_id, "--wait", "w1").returncode == 0
    _nothing_to_do(cli.here("runs", "wake", run_id, "--wait", "w1"), "no pending wait 'w1'")
    _until(lambda: cli.json("runs", "show", run_id)["hooks"], "the run's hook")
    payload = '{"approved": true, "by": "ana"}'
    _refused(cli.here("hooks", "resume", "go:nobody", "--payload", payload))  # no such token
    assert cli.here("hooks", "resume", "go:t-4", "--payload", payload).returncode == 0
    # answered once the run has taken the payload (until then a second resume is still taken,
    # as a hook may be resumed more than once before its run reads it)
    assert cli.wait_status(run_id, "completed")["output"] == "ana"
    _nothing_to_do(cli.here("hooks", "resume", "go:t-4", "--payload", payload), "nothing to resume")


def test_schedules_verbs_follow_the_rule(cli: Cli, world_url: str) -> None:
    add = ["schedules", "add", "nightly", "--cron", "0 3 * * *", "--workflow", "approval"]
    assert cli.here(*add).returncode == 0
    _refused(cli.here(*add))  # the name is taken: refused, not overwritten
    _refused(cli.here("schedules", "remove", "weekly"))  # no such schedule
    ran = cli.here("schedules", "run", "--once")  # a pass with no tick due did what it is for
    assert ran.returncode == 0, ran.stderr
    assert cli.here("schedules", "remove", "nightly").returncode == 0
