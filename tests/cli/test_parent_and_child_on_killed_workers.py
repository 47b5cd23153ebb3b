"""A parent and its child served by different applications' ``wayline worker`` processes, one
of which is SIGKILLed (both worlds): the parent cancelled while the child's worker dies, and a
hook of the child resumed while the parent's worker is dead."""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from pathlib import Path

from tests.cli.conftest import Background, Cli
from tests.cli.worker_races import (
    KIDS,
    PARENTS,
    seen,
    short_visibility,
    start,
    types,
    until,
    worker,
)
from tests.runtime import adversarial_flows as af


def test_cancel_parent_while_the_childs_worker_is_sigkilled(
    cli: Cli, world_url: str, spawn: Callable[..., Background], tmp_path: Path
) -> None:
    """Parent and child on different applications' workers; the child's worker is SIGKILLed
    mid charge and the parent cancelled at once. The child is cancelled and refunds once, no
    refund beside a charge, and the parent ends cancelled."""
    short_visibility(cli)
    marker = str(tmp_path / "m")
    parents = worker(spawn, PARENTS)
    kids = worker(spawn, KIDS)  # one process: the SIGKILL kills the body
    parents.wait_for("ready", timeout=30)
    kids.wait_for("ready", timeout=30)
    run_id = start(cli, "r2_parent", marker, 1.5)
    until(lambda: len(af.spans(marker, "charge")) >= 1)
    kids.stop(signal.SIGKILL)
    af.mark(marker, f"killed {time.time():.6f}")
    done = cli.here("runs", "cancel", run_id)
    assert done.returncode == 0, done.stderr
    kids2 = worker(spawn, KIDS)
    kids2.wait_for("ready", timeout=30)
    # NATS: the killed worker's delivery of the child returns only after the visibility
    # timeout (6 s here, from its last renewal), and the child's refund, its end and the
    # parent's come after it; the bound is for a loaded machine
    shown = cli.wait_status(run_id, "cancelled", timeout=60)
    kid_id = next(e for e in shown["events"] if e["type"] == "child_created")["data"]
    assert cli.json("runs", "show", kid_id["childRunId"])["status"] == "cancelled"
    marks = seen(marker)
    assert marks.count("refund-start") == 1, marks
    after_kill = marks[marks.index("killed") + 1 :]
    refund_at = after_kill.index("refund-start")
    before = after_kill[:refund_at]
    assert before.count("charge-start") == before.count("charge-end"), marks
    assert "charge-start" not in after_kill[refund_at:], marks


def test_parents_worker_sigkilled_while_child_runs_then_hook_resumed_by_cli(
    cli: Cli, world_url: str, spawn: Callable[..., Background], tmp_path: Path
) -> None:
    short_visibility(cli)
    marker = str(tmp_path / "m")
    parents = worker(spawn, PARENTS)
    kids = worker(spawn, KIDS)
    parents.wait_for("ready", timeout=30)
    kids.wait_for("ready", timeout=30)
    run_id = start(cli, "r2_parent", marker, 0.5)
    until(lambda: len(af.spans(marker, "charge")) >= 1)
    parents.stop(signal.SIGKILL)
    token = f"r2-kid:{marker}"
    deadline = time.monotonic() + 20
    while (done := cli.here("hooks", "resume", token, "--payload", "1")).returncode != 0:
        assert time.monotonic() < deadline, done.stderr
        time.sleep(0.1)
    parents2 = worker(spawn, PARENTS)
    parents2.wait_for("ready", timeout=30)
    # NATS: a delivery the killed worker held returns only after the visibility timeout
    shown = cli.wait_status(run_id, "completed", timeout=60)
    assert shown["output"] == "parent got charged"
    assert types(shown).count("child_created") == 1
    assert len(af.spans(marker, "charge")) == 1, seen(marker)
