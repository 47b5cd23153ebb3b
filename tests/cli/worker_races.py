"""Helpers of the process-level races of CLI commands against live ``wayline worker``
processes (``test_processes_starting_at_once.py``, ``test_commands_beside_live_workers.py``,
``test_commands_beside_a_killed_worker.py``, ``test_parent_and_child_on_killed_workers.py``).

The workers serve applications that are modules of this repository's tests, so they run in
the repository's root, which ``python -m`` puts first on the import path. A ``PYTHONPATH``
naming the root did the same before, but the zygote cannot give a child a ``PYTHONPATH`` of
its own (``forkable``), so each worker was a new interpreter, one to three seconds of start
each; in the root they are forked from the zygote."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.cli.conftest import REPO, Background, Cli
from tests.runtime import adversarial_flows as af

APP = "tests.runtime.race2_flows"
ADV = "tests.runtime.adversarial_flows"
PARENTS = "tests.cli.race2_parent_app"
KIDS = "tests.cli.race2_kid_app"
APP_B = str(Path(__file__).with_name("adversarial_app_b.py"))


def worker(spawn: Callable[..., Background], app: str, processes: int = 1) -> Background:
    """``wayline worker --app APP --processes N`` in the repository's root. One process unless
    a test is about a supervisor: a supervisor's children are new interpreters, as many as
    the machine has CPUs by default, and these tests are about the commands beside workers."""
    return spawn("worker", "--app", app, "--processes", str(processes), cwd=REPO)


def until(check: Callable[[], bool], timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "condition not met"
        time.sleep(0.05)


def short_visibility(cli: Cli) -> None:
    """A killed worker's held delivery returns after the visibility timeout (30 s by default),
    which these tests waited out on NATS. Six seconds still leaves a live worker, which renews
    every third of it, two seconds between renewals on a loaded machine; the claims are about
    what happens once the delivery returns, not about when."""
    cli.env["WAYLINE_VISIBILITY_SECONDS"] = "6"


def start(cli: Cli, workflow: str, *args: Any) -> str:
    done = cli.here("start", workflow, "--input", json.dumps(list(args)))
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def seen(path: str) -> list[str]:
    return [line.rpartition(" ")[0] for line in af.lines(path)]


def types(shown: dict[str, Any]) -> list[str]:
    return [e["type"] for e in shown["events"]]
