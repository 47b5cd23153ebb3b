"""``wayline worker --processes N``: N worker processes under one supervisor, on both worlds.

The children are real ``wayline worker`` processes on a real SQLite file or a real
nats-server; each step records in a ledger file that (and how often) its body ran.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

import wayline
from tests.cli.conftest import Background, Cli
from tests.cli.pid_flows import which_process
from tests.conftest import WORLD_KINDS
from tests.runtime.test_health import _get
from tests.servers import free_port
from wayline.cli import build_parser
from wayline.cli.commands import worker_child_argv
from wayline.cli.supervisor import cpu_quota, default_processes

PID_FLOWS = Path(__file__).with_name("pid_flows.py")
STARTED = re.compile(r"worker process (\d+) started \(pid (\d+)\)")

pytestmark = pytest.mark.slow


@pytest.fixture(params=WORLD_KINDS)
def world_cli(request: pytest.FixtureRequest, cli: Cli) -> Cli:
    """The ``cli`` fixture on the parametrised world, with a step ledger."""
    if request.param == "nats":
        server = request.getfixturevalue("nats_server")
        cli.world = f"{server.url}?prefix=t{uuid.uuid4().hex[:12]}"
    cli.env["WAYLINE_TEST_LEDGER"] = str(cli.cwd / "ledger")
    return cli


def ledger(cli: Cli, *, started: bool = False) -> list[str]:
    """The keys of the step bodies that ended (or, with ``started``, that started)."""
    path = cli.cwd / "ledger"
    lines = path.read_text().split() if path.exists() else []
    if started:
        return [line.removeprefix("start:") for line in lines if line.startswith("start:")]
    return [line for line in lines if not line.startswith("start:")]


def children(sup: Background, count: int, timeout: float = 30) -> dict[int, int]:
    """Slot -> pid of the newest child in each slot, once ``count`` children reported ready."""
    deadline = time.monotonic() + timeout
    while True:
        _, err = sup.output()
        if err.count(" ready on ") >= count:
            return {int(slot): int(pid) for slot, pid in STARTED.findall(err)}
        assert sup.proc.poll() is None, f"supervisor exited ({sup.proc.returncode}):\n{err}"
        assert time.monotonic() < deadline, f"{count} children not ready:\n{err}"
        time.sleep(0.05)


async def run_all(url: str, keys: list[str], seconds: float) -> list[int]:
    """Start one run per key at once; the pids of the processes that ran their steps."""
    async with wayline.open_world(url) as world:
        client = wayline.Client(world)
        handles = [await client.start(which_process, key, seconds) for key in keys]
        return [await h.result(timeout=60) for h in handles]


async def start_runs(url: str, keys: list[str], seconds: float) -> list[str]:
    async with wayline.open_world(url) as world:
        client = wayline.Client(world)
        return [(await client.start(which_process, key, seconds)).run_id for key in keys]


async def results(url: str, run_ids: list[str]) -> list[int]:
    async with wayline.open_world(url) as world:
        client = wayline.Client(world)
        return [await client.handle(r).result(timeout=60) for r in run_ids]


def worker(spawn: Callable[..., Background], processes: int = 2, *more: str) -> Background:
    return spawn(
        "worker",
        "--app",
        str(PID_FLOWS),
        "--processes",
        str(processes),
        "--flow-concurrency",
        "1",
        "--step-concurrency",
        "1",
        *more,
    )


def test_every_child_consumes_and_sigterm_drains_them_all(
    world_cli: Cli, spawn: Callable[..., Background]
) -> None:
    sup = worker(spawn, 2)
    pids = children(sup, 2)
    assert len(set(pids.values())) == 2
    keys = [f"a{i}" for i in range(8)]
    ran_in = asyncio.run(run_all(world_cli.world, keys, 0.3))
    assert set(ran_in) == set(pids.values())  # one run at a time each: both took some
    assert sorted(ledger(world_cli)) == sorted(keys)

    # Two runs in flight when SIGTERM arrives: both steps finish (once), nothing is lost.
    in_flight = asyncio.run(start_runs(world_cli.world, ["d0", "d1"], 1.5))
    deadline = time.monotonic() + 30
    while (
        sorted(ledger(world_cli, started=True)).count("d0")
        + ledger(world_cli, started=True).count("d1")
        < 2
    ):
        assert time.monotonic() < deadline, ledger(world_cli, started=True)
        time.sleep(0.02)
    assert sup.stop(signal.SIGTERM, timeout=60) == 0
    _, err = sup.output()
    assert "SIGTERM: stopping 2 worker processes" in err
    assert err.count("worker stopped") == 2
    assert "supervisor" in err and "stopped (exit 0)" in err
    for pid in pids.values():
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)

    again = worker(spawn, 1)
    children(again, 1)
    assert len(asyncio.run(results(world_cli.world, in_flight))) == 2
    assert sorted(ledger(world_cli)) == sorted([*keys, "d0", "d1"])  # each body ran once
    assert again.stop() == 0


def test_a_killed_child_is_replaced_and_the_replacements_consume(
    world_cli: Cli, spawn: Callable[..., Background]
) -> None:
    sup = worker(spawn, 2)
    first = children(sup, 2)
    for slot, pid in sorted(first.items()):
        os.kill(pid, signal.SIGKILL)
        ready = sup.output()[1].count(" ready on ") + 1
        now = children(sup, ready)
        assert now[slot] != pid
    replaced = children(sup, 4)
    assert set(replaced.values()).isdisjoint(first.values())
    keys = [f"k{i}" for i in range(6)]
    ran_in = asyncio.run(run_all(world_cli.world, keys, 0.2))
    assert set(ran_in) <= set(replaced.values())
    assert sorted(ledger(world_cli)) == sorted(keys)
    _, err = sup.output()
    assert err.count("exited with -9; starting another") == 2
    assert sup.stop() == 0


def test_a_child_that_cannot_open_the_world_stops_the_supervisor_with_exit_2(
    cli: Cli, spawn: Callable[..., Background]
) -> None:
    blocker = cli.cwd / "a-file"
    blocker.write_text("not a directory")
    cli.world = f"sqlite:///{blocker}/w.db"
    sup = worker(spawn, 2)
    assert sup.proc.wait(60) == 2
    _, err = sup.output()
    assert "refused its arguments" in err
    assert len(STARTED.findall(err)) == 2  # not restarted


def test_a_bad_app_is_refused_once_before_any_child_starts(cli: Cli) -> None:
    done = cli("worker", "--app", "json", "--processes", "3")
    assert done.returncode == 2
    assert "'json' defines no workflow" in done.stderr
    assert "started (pid" not in done.stderr


def test_only_the_first_child_serves_the_probes(cli: Cli, spawn: Callable[..., Background]) -> None:
    port = free_port()
    sup = worker(spawn, 2, "--health-port", str(port))
    children(sup, 2)
    assert _get(port, "/readyz") == (200, "ok\n")
    args = build_parser().parse_args(
        ["worker", "--app", "m", "--health-port", str(port), "--world", "sqlite:///x.db"]
    )
    assert "--health-port" in worker_child_argv(args, 0)
    assert "--health-port" not in worker_child_argv(args, 1)
    assert worker_child_argv(args, 1)[worker_child_argv(args, 1).index("--processes") + 1] == "1"
    assert sup.stop() == 0


@pytest.mark.parametrize(
    ("files", "expected"),
    [
        ({"cpu.max": "max 100000\n"}, None),
        ({"cpu.max": "200000 100000\n"}, 2),
        ({"cpu.max": "150000 100000\n"}, 2),
        ({"cpu.max": "50000 100000\n"}, 1),
        ({"cpu/cpu.cfs_quota_us": "300000\n", "cpu/cpu.cfs_period_us": "100000\n"}, 3),
        ({"cpu/cpu.cfs_quota_us": "-1\n", "cpu/cpu.cfs_period_us": "100000\n"}, None),
        ({}, None),
    ],
)
def test_the_cpu_quota_of_the_container(
    tmp_path: Path, files: dict[str, str], expected: int | None
) -> None:
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    assert cpu_quota(tmp_path) == expected


def test_the_default_is_at_least_one_and_at_most_the_cpus() -> None:
    assert 1 <= default_processes() <= (os.cpu_count() or 1)


def test_sigterm_while_the_children_are_starting_is_a_clean_stop(
    cli: Cli, spawn: Callable[..., Background]
) -> None:
    sup = worker(spawn, 2)
    deadline = time.monotonic() + 30
    while len(STARTED.findall(sup.output()[1])) < 2:  # started, maybe not ready
        assert time.monotonic() < deadline, sup.output()
        time.sleep(0.01)
    assert sup.stop(signal.SIGTERM, timeout=60) == 0
    _, err = sup.output()
    assert "stopped (exit 0)" in err
