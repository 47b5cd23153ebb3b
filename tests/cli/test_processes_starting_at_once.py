"""Processes that start at the same moment on one world (both worlds): six workers creating a
fresh world's streams, consumers and buckets, and three schedulers at one tick."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

from tests.cli.conftest import Background, Cli
from tests.cli.worker_races import APP, APP_B, seen, start, worker


def test_workers_started_at_once_on_a_fresh_world(
    cli: Cli, world_url: str, spawn: Callable[..., Background], tmp_path: Path
) -> None:
    """Six worker processes (two supervisors of two, one per application, and a lone one)
    create the world's streams, consumers and buckets at the same moment."""
    marker = str(tmp_path / "m")
    workers = [
        worker(spawn, APP_B, processes=2),
        worker(spawn, APP_B, processes=2),
        worker(spawn, APP),
        worker(spawn, APP),
    ]
    for w in workers:
        w.wait_for("ready", timeout=30)
    runs = [start(cli, "adv_b_flow", n) for n in (3, 4, 5)]
    sleepy = [start(cli, "r2_sleepy", marker, tag, 0.2) for tag in ("x", "y")]
    for run_id, n in zip(runs, (3, 4, 5), strict=True):
        assert cli.wait_status(run_id, "completed", timeout=30)["output"] == n * (n - 1) // 2
    for run_id, tag in zip(sleepy, ("x", "y"), strict=True):
        assert cli.wait_status(run_id, "completed", timeout=30)["output"] == tag
    assert sorted(seen(marker)) == ["after-x", "after-y"]
    for w in workers:
        assert w.proc.poll() is None, w.output()[1]
        assert "Traceback" not in w.output()[1], w.output()[1]


def test_two_schedulers_looking_at_the_same_tick(
    cli: Cli, world_url: str, spawn: Callable[..., Background], tmp_path: Path
) -> None:
    """Two ``schedules run --once`` at the same tick, and at the next tick with Replace:
    one run per tick, the earlier one cancelled once."""
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
