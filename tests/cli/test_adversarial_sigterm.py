"""Kubernetes stops a worker pod with SIGTERM and a grace (``--shutdown-grace``) that a long
step body can outlive. Two applications share the world; the run's replacement worker (a new
pod of the same application) takes over at once. A sync charge body must never run beside its
own thread, and a cancel's refund never before the charge ended (both worlds)."""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path

from tests.cli.conftest import REPO, Background, Cli
from tests.runtime import adversarial_flows as af

APP_A = "tests.runtime.adversarial_flows"
APP_B = str(Path(__file__).with_name("adversarial_app_b.py"))


def _until(check: Callable[[], bool], timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "condition not met"
        time.sleep(0.05)


def test_sigterm_mid_sync_charge_then_cancel_keeps_charge_and_refund_apart(
    cli: Cli, world_url: str, spawn: Callable[..., Background], tmp_path: Path
) -> None:
    marker = str(tmp_path / "m")
    # the application is a module of this repository's tests: importable from its root
    cli.env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), cli.env.get("PYTHONPATH")]))
    # On NATS the stopped worker's delivery of the charge comes back to a2 only after the
    # visibility timeout (30 s by default), which the cancel's 30 s bound below shared with a
    # loaded machine; six seconds still leave a live worker two between renewals, and the
    # claim is about what happens once it comes back (as tests/cli/worker_races.py says).
    cli.env["WAYLINE_VISIBILITY_SECONDS"] = "6"
    a1 = spawn("worker", "--app", APP_A, "--shutdown-grace", "0.3")
    b1 = spawn("worker", "--app", APP_B)
    a1.wait_for("ready", timeout=20)
    b1.wait_for("ready", timeout=20)
    started = cli.here("start", "adv_sync_charge", "--input", json.dumps([marker, 2.5]))
    assert started.returncode == 0, started.stderr
    run_id = started.stdout.strip()
    other = cli.here("start", "adv_b_flow", "--input", "[5]")
    assert other.returncode == 0, other.stderr
    _until(lambda: len(af.spans(marker, "charge")) >= 1)
    a2 = spawn("worker", "--app", APP_A)  # another replica (a rollout's new pod)
    a2.wait_for("ready", timeout=20)
    a1.stop(signal.SIGTERM, timeout=15)  # the grace (0.3 s) ends while the charge runs
    cancelled = cli.here("runs", "cancel", run_id)
    assert cancelled.returncode == 0, cancelled.stderr
    cli.wait_status(run_id, "cancelled", timeout=30)
    assert cli.wait_status(other.stdout.strip(), "completed")["output"] == 10
    time.sleep(0.5)
    seen = [line.rpartition(" ")[0] for line in af.lines(marker)]
    assert not af.overlapping(marker, "charge"), seen
    refund_at = seen.index("refund-start")
    assert seen[:refund_at].count("charge-start") == seen[:refund_at].count("charge-end"), seen
    assert seen.count("refund-start") == 1, seen
