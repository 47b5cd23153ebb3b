"""``wayline queue drain-lanes``: before a rollback to a release before the priority levels, it
moves the queued work of a priority or a fairness key to the subject such a release reads,
prints what it moved and left, and the run it belongs to still completes."""

from __future__ import annotations

import json
from collections.abc import Callable

from tests.cli.conftest import FLOWS, Background, Cli


def test_drain_lanes_moves_a_prioritised_start_and_the_run_completes(
    cli: Cli, world_url: str, spawn: Callable[..., Background]
) -> None:
    started = cli.here(
        "start", f"{FLOWS}:add", "--input", "[2, 3]", "--priority", "3", "--fairness-key", "t-1"
    )
    assert started.returncode == 0, started.stderr
    run_id = started.stdout.strip()
    done = cli.here("queue", "drain-lanes")
    assert done.returncode == 0, done.stderr
    moved = 1 if world_url.startswith("nats") else 0  # SQLite keeps every level in one table
    assert json.loads(done.stdout) == {"moved": moved, "held": 0, "delayed": 0}
    again = cli.here("queue", "drain-lanes")
    assert json.loads(again.stdout) == {"moved": 0, "held": 0, "delayed": 0}
    worker = spawn("worker", "--app", str(FLOWS))
    try:
        assert cli.wait_status(run_id, "completed")["status"] == "completed"
    finally:
        worker.stop()


def test_queue_alone_shows_its_commands(cli: Cli) -> None:
    done = cli.here("queue")
    assert done.returncode == 2 and "drain-lanes" in done.stderr, done.stderr


def test_a_shortened_held_too_is_refused_and_moves_nothing(cli: Cli) -> None:
    """``--held-too`` moves work from under running workers: ``--held`` (the word of the
    printed counts) is refused, not taken for it as argparse would by default."""
    started = cli.here("start", f"{FLOWS}:add", "--input", "[1, 1]", "--priority", "2")
    assert started.returncode == 0, started.stderr
    for flag in ("--held", "--held-t"):
        done = cli.here("queue", "drain-lanes", flag)
        assert done.returncode == 2, (flag, done.stdout, done.stderr)
        assert f"unrecognized arguments: {flag}" in done.stderr, done.stderr
    done = cli.here("queue", "drain-lanes", "--held-too")
    assert done.returncode == 0, done.stderr
