"""``runs terminate`` and ``hooks resume`` beside ``wayline worker`` processes that are
SIGKILLed (both worlds): an ended run does not change when a new worker comes, and every
resumed hook's run completes once the killed worker's delivery returns."""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from pathlib import Path

from tests.cli.conftest import Background, Cli
from tests.cli.worker_races import ADV, seen, short_visibility, start, types, until, worker
from tests.runtime import adversarial_flows as af


def test_terminate_mid_sync_charge_then_sigkill_and_a_new_worker(
    cli: Cli, world_url: str, spawn: Callable[..., Background], tmp_path: Path
) -> None:
    """An ended run does not change: the charge's late result is refused, no refund runs,
    and a replacement worker (after the SIGKILL of the first) drives nothing."""
    marker = str(tmp_path / "m")
    w1 = worker(spawn, ADV)
    w1.wait_for("ready", timeout=30)
    run_id = start(cli, "adv_sync_charge", marker, 1.5)
    until(lambda: len(af.spans(marker, "charge")) >= 1)
    done = cli.here("runs", "terminate", run_id)
    assert done.returncode == 0, done.stderr
    ended = cli.wait_status(run_id, "cancelled")
    until(lambda: "charge-end" in seen(marker))
    w1.stop(signal.SIGKILL)
    w2 = worker(spawn, ADV)
    w2.wait_for("ready", timeout=30)
    time.sleep(1.5)  # what the new worker would drive, it would drive by now
    after = cli.json("runs", "show", run_id)
    assert after["status"] == "cancelled"
    assert types(after) == types(ended), (types(ended), types(after))
    assert seen(marker) == ["charge-start", "charge-end"], seen(marker)


def test_hooks_resume_then_sigkill_of_one_of_two_workers(
    cli: Cli, world_url: str, spawn: Callable[..., Background], tmp_path: Path
) -> None:
    short_visibility(cli)
    marker = str(tmp_path / "m")
    w1 = worker(spawn, ADV)
    w2 = worker(spawn, ADV)
    w1.wait_for("ready", timeout=30)
    w2.wait_for("ready", timeout=30)
    runs = {
        f"tok-{i}-{marker}": start(cli, "adv_hook_or_timeout", marker, f"tok-{i}-{marker}")
        for i in range(3)
    }
    for token in runs:
        until(lambda token=token: cli.here("hooks", "list", "--json").stdout.count(token) > 0)
    for i, token in enumerate(runs):
        done = cli.here("hooks", "resume", token, "--payload", str(i))
        assert done.returncode == 0, done.stderr
    w1.stop(signal.SIGKILL)  # maybe while it drives the last run resumed
    for i, (token, run_id) in enumerate(runs.items()):
        # NATS: a delivery the killed worker held returns only after the visibility timeout
        assert cli.wait_status(run_id, "completed", timeout=60)["output"] == f"got {i}"
        assert f"{token} got {i}" in af.lines(marker)
