"""Process-level races of CLI commands against live ``wayline worker`` processes (both
worlds): terminate, cancel, wake, repair and hooks resume beside workers that are SIGKILLed;
parents and children served by different applications; two workers starting at once on a
fresh world; two schedulers."""

from __future__ import annotations

import json
import os
import signal
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


def _until(check: Callable[[], bool], timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "condition not met"
        time.sleep(0.05)


def _importable(cli: Cli) -> None:
    # the applications are modules of this repository's tests: importable from its root
    cli.env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), cli.env.get("PYTHONPATH")]))


def _short_visibility(cli: Cli) -> None:
    """A killed worker's held delivery returns after the visibility timeout (30 s by default),
    which these tests waited out on NATS. Six seconds still leaves a live worker, which renews
    every third of it, two seconds between renewals on a loaded machine; the claims are about
    what happens once the delivery returns, not about when."""
    cli.env["WAYLINE_VISIBILITY_SECONDS"] = "6"


def _start(cli: Cli, workflow: str, *args: Any) -> str:
    done = cli.here("start", workflow, "--input", json.dumps(list(args)))
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def _seen(path: str) -> list[str]:
    return [line.rpartition(" ")[0] for line in af.lines(path)]


def _types(shown: dict[str, Any]) -> list[str]:
    return [e["type"] for e in shown["events"]]


def test_workers_started_at_once_on_a_fresh_world(
    cli: Cli, world_url: str, spawn: Callable[..., Background], tmp_path: Path
) -> None:
    """Six worker processes (two supervisors of two, one per application, and a lone one)
    create the world's streams, consumers and buckets at the same moment."""
    _importable(cli)
    marker = str(tmp_path / "m")
    workers = [
        spawn("worker", "--app", APP_B, "--processes", "2"),
        spawn("worker", "--app", APP_B, "--processes", "2"),
        spawn("worker", "--app", APP, "--processes", "1"),
        spawn("worker", "--app", APP, "--processes", "1"),
    ]
    for w in workers:
        w.wait_for("ready", timeout=30)
    runs = [_start(cli, "adv_b_flow", n) for n in (3, 4, 5)]
    sleepy = [_start(cli, "r2_sleepy", marker, tag, 0.2) for tag in ("x", "y")]
    for run_id, n in zip(runs, (3, 4, 5), strict=True):
        assert cli.wait_status(run_id, "completed", timeout=30)["output"] == n * (n - 1) // 2
    for run_id, tag in zip(sleepy, ("x", "y"), strict=True):
        assert cli.wait_status(run_id, "completed", timeout=30)["output"] == tag
    assert sorted(_seen(marker)) == ["after-x", "after-y"]
    for w in workers:
        assert w.proc.poll() is None, w.output()[1]
        assert "Traceback" not in w.output()[1], w.output()[1]


def test_terminate_mid_sync_charge_then_sigkill_and_a_new_worker(
    cli: Cli, world_url: str, spawn: Callable[..., Background], tmp_path: Path
) -> None:
    """An ended run does not change: the charge's late result is refused, no refund runs,
    and a replacement worker (after the SIGKILL of the first) drives nothing."""
    _importable(cli)
    marker = str(tmp_path / "m")
    w1 = spawn("worker", "--app", ADV, "--processes", "1")
    w1.wait_for("ready", timeout=30)
    run_id = _start(cli, "adv_sync_charge", marker, 1.5)
    _until(lambda: len(af.spans(marker, "charge")) >= 1)
    done = cli.here("runs", "terminate", run_id)
    assert done.returncode == 0, done.stderr
    ended = cli.wait_status(run_id, "cancelled")
    _until(lambda: "charge-end" in _seen(marker))
    w1.stop(signal.SIGKILL)
    w2 = spawn("worker", "--app", ADV)
    w2.wait_for("ready", timeout=30)
    time.sleep(1.5)
    after = cli.json("runs", "show", run_id)
    assert after["status"] == "cancelled"
    assert _types(after) == _types(ended), (_types(ended), _types(after))
    assert _seen(marker) == ["charge-start", "charge-end"], _seen(marker)


def test_cancel_parent_while_the_childs_worker_is_sigkilled(
    cli: Cli, world_url: str, spawn: Callable[..., Background], tmp_path: Path
) -> None:
    """Parent and child on different applications' workers; the child's worker is SIGKILLed
    mid charge and the parent cancelled at once. The child is cancelled and refunds once, no
    refund beside a charge, and the parent ends cancelled."""
    _importable(cli)
    _short_visibility(cli)
    marker = str(tmp_path / "m")
    parents = spawn("worker", "--app", PARENTS)
    kids = spawn("worker", "--app", KIDS, "--processes", "1")  # SIGKILL kills the body
    parents.wait_for("ready", timeout=30)
    kids.wait_for("ready", timeout=30)
    run_id = _start(cli, "r2_parent", marker, 1.5)
    _until(lambda: len(af.spans(marker, "charge")) >= 1)
    kids.stop(signal.SIGKILL)
    af.mark(marker, f"killed {time.time():.6f}")
    done = cli.here("runs", "cancel", run_id)
    assert done.returncode == 0, done.stderr
    kids2 = spawn("worker", "--app", KIDS)
    kids2.wait_for("ready", timeout=30)
    # NATS: the killed worker's delivery of the child returns only after the visibility
    # timeout (6 s here, from its last renewal), and the child's refund, its end and the
    # parent's come after it; the bound is for a loaded machine
    shown = cli.wait_status(run_id, "cancelled", timeout=60)
    kid_id = next(e for e in shown["events"] if e["type"] == "child_created")["data"]
    assert cli.json("runs", "show", kid_id["childRunId"])["status"] == "cancelled"
    seen = _seen(marker)
    assert seen.count("refund-start") == 1, seen
    after_kill = seen[seen.index("killed") + 1 :]
    refund_at = after_kill.index("refund-start")
    before = after_kill[:refund_at]
    assert before.count("charge-start") == before.count("charge-end"), seen
    assert "charge-start" not in after_kill[refund_at:], seen


def test_parents_worker_sigkilled_while_child_runs_then_hook_resumed_by_cli(
    cli: Cli, world_url: str, spawn: Callable[..., Background], tmp_path: Path
) -> None:
    _importable(cli)
    _short_visibility(cli)
    marker = str(tmp_path / "m")
    parents = spawn("worker", "--app", PARENTS, "--processes", "1")
    kids = spawn("worker", "--app", KIDS)
    parents.wait_for("ready", timeout=30)
    kids.wait_for("ready", timeout=30)
    run_id = _start(cli, "r2_parent", marker, 0.5)
    _until(lambda: len(af.spans(marker, "charge")) >= 1)
    parents.stop(signal.SIGKILL)
    token = f"r2-kid:{marker}"
    deadline = time.monotonic() + 20
    while (done := cli.here("hooks", "resume", token, "--payload", "1")).returncode != 0:
        assert time.monotonic() < deadline, done.stderr
        time.sleep(0.1)
    parents2 = spawn("worker", "--app", PARENTS)
    parents2.wait_for("ready", timeout=30)
    # NATS: a delivery the killed worker held returns only after the visibility timeout
    shown = cli.wait_status(run_id, "completed", timeout=60)
    assert shown["output"] == "parent got charged"
    assert _types(shown).count("child_created") == 1
    assert len(af.spans(marker, "charge")) == 1, _seen(marker)


def test_hooks_resume_then_sigkill_of_one_of_two_workers(
    cli: Cli, world_url: str, spawn: Callable[..., Background], tmp_path: Path
) -> None:
    _importable(cli)
    _short_visibility(cli)
    marker = str(tmp_path / "m")
    w1 = spawn("worker", "--app", ADV, "--processes", "1")
    w2 = spawn("worker", "--app", ADV, "--processes", "1")
    w1.wait_for("ready", timeout=30)
    w2.wait_for("ready", timeout=30)
    runs = {
        f"tok-{i}-{marker}": _start(cli, "adv_hook_or_timeout", marker, f"tok-{i}-{marker}")
        for i in range(3)
    }
    for token in runs:
        _until(lambda token=token: cli.here("hooks", "list", "--json").stdout.count(token) > 0)
    for i, token in enumerate(runs):
        done = cli.here("hooks", "resume", token, "--payload", str(i))
        assert done.returncode == 0, done.stderr
    w1.stop(signal.SIGKILL)  # maybe while it drives the last run resumed
    for i, (token, run_id) in enumerate(runs.items()):
        # NATS: a delivery the killed worker held returns only after the visibility timeout
        assert cli.wait_status(run_id, "completed", timeout=60)["output"] == f"got {i}"
        assert f"{token} got {i}" in af.lines(marker)


def test_runs_wake_racing_the_sleeps_own_timer_and_two_workers(
    cli: Cli, world_url: str, spawn: Callable[..., Background], tmp_path: Path
) -> None:
    """``runs wake`` at about the moment the sleep comes due, two workers: the step after the
    sleep runs once (no crash, so exactly once), and every run completes."""
    _importable(cli)
    marker = str(tmp_path / "m")
    w1 = spawn("worker", "--app", APP)
    w2 = spawn("worker", "--app", APP)
    w1.wait_for("ready", timeout=30)
    w2.wait_for("ready", timeout=30)
    runs = {tag: _start(cli, "r2_sleepy", marker, tag, 1.0) for tag in ("a", "b", "c")}
    time.sleep(0.7)
    for run_id in runs.values():
        cli.here("runs", "wake", run_id)  # 0 (woke it) or 1 (its timer won): both fine
    for tag, run_id in runs.items():
        assert cli.wait_status(run_id, "completed", timeout=30)["output"] == tag
    seen = _seen(marker)
    for tag in runs:
        assert seen.count(f"after-{tag}") == 1, seen


def test_runs_repair_of_a_live_run_beside_its_worker_changes_nothing(
    cli: Cli, world_url: str, spawn: Callable[..., Background], tmp_path: Path
) -> None:
    """Repair with nothing to repair (no --drop-seq) while a worker drives the run and a hook
    waits: the hook still resumes, the run completes once; a --drop-seq of a readable entry
    is refused and removes nothing."""
    _importable(cli)
    marker = str(tmp_path / "m")
    w1 = spawn("worker", "--app", ADV)
    w1.wait_for("ready", timeout=30)
    token = f"rep-{marker}"
    run_id = _start(cli, "adv_hook_or_timeout", marker, token)
    _until(lambda: token in cli.here("hooks", "list", "--json").stdout)
    before = cli.json("runs", "show", run_id)
    refused = cli.here("runs", "repair", run_id, "--drop-seq", "2")
    assert refused.returncode != 0, refused.stdout
    assert _types(cli.json("runs", "show", run_id)) == _types(before)
    repaired = cli.here("runs", "repair", run_id)
    assert repaired.returncode == 0, repaired.stderr
    done = cli.here("hooks", "resume", token, "--payload", "7")
    assert done.returncode == 0, done.stderr
    shown = cli.wait_status(run_id, "completed", timeout=30)
    assert shown["output"] == "got 7"
    again = cli.here("runs", "repair", run_id)
    assert again.returncode == 0, again.stderr
    time.sleep(0.5)
    assert _types(cli.json("runs", "show", run_id)) == _types(shown)
    assert af.lines(marker) == [f"{token} got 7"]


def test_two_schedulers_looking_at_the_same_tick(
    cli: Cli, world_url: str, spawn: Callable[..., Background], tmp_path: Path
) -> None:
    """Two ``schedules run --once`` at the same tick, and at the next tick with Replace:
    one run per tick, the earlier one cancelled once."""
    _importable(cli)
    sched = str(tmp_path / "s.json")
    added = cli.here(
        "schedules",
        "add",
        "nightly",
        "--cron",
        "*/5 * * * *",
        "--workflow",
        "adv_b_flow",
        "--input",
        "[3]",
        "--concurrency-policy",
        "Replace",
        "--file",
        sched,
    )
    assert added.returncode == 0, added.stderr
    created = json.loads(Path(sched).read_text())["nightly"]["created"]
    first = created + 600 - created % 300
    ticks = [time.strftime("%Y-%m-%dT%H:%M:00Z", time.gmtime(t)) for t in (first, first + 300)]
    for n, now in enumerate(ticks, 1):
        procs = [
            spawn("schedules", "run", "--once", "--now", now, "--file", sched) for _ in range(3)
        ]
        for p in procs:
            assert p.proc.wait(30) == 0, p.output()
        said = [p.output()[0] for p in procs]
        assert sum("started" in out for out in said) == 1, said
        assert len(cli.json("runs", "list")) == n
