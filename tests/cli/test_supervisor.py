"""``wayline worker --processes N``: N worker processes under one supervisor, on both worlds.

The children are real ``wayline worker`` processes on a real SQLite file or a real
nats-server; each step records in a ledger file that (and how often) its body ran.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import wayline
from tests.cli.conftest import Background, Cli, zygote_for
from tests.cli.pid_flows import which_process
from tests.conftest import WORLD_KINDS
from tests.operator.zygote import Forked
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


def until_started(cli: Cli, sup: Background, name: str) -> None:
    """Wait (30 s at most) until the ledger shows the run ``name``'s step started."""
    deadline = time.monotonic() + 30
    while name not in ledger(cli, started=True):
        assert time.monotonic() < deadline, sup.output()[1]
        time.sleep(0.02)


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
    done = cli.here("worker", "--app", "json", "--processes", "3")
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


# --- a supervisor that goes while its children still wait for the world --------------------
REACHING = "is not reachable yet"


def unreachable(cli: Cli) -> None:
    """A NATS URL with nothing listening: a worker waits for it (up to 300 s) before it starts."""
    cli.world = f"nats://127.0.0.1:{free_port()}"


def alive(pid: int) -> bool:
    """``pid`` runs (a zombie has ended: its reaping is up to whoever it was re-parented to)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"


def waiting_children(sup: Background, count: int) -> list[int]:
    """The pids of the ``count`` children once each has said it waits for the world."""
    deadline = time.monotonic() + 30
    while True:
        _, err = sup.output()
        pids = [int(pid) for _, pid in STARTED.findall(err)]
        if len(pids) >= count and err.count(REACHING) >= count:
            return pids
        assert sup.proc.poll() is None, f"supervisor exited ({sup.proc.returncode}):\n{err}"
        assert time.monotonic() < deadline, f"{count} children not waiting:\n{err}"
        time.sleep(0.05)


def gone(pids: list[int], timeout: float) -> list[int]:
    """The pids still running after ``timeout`` seconds (an empty list once all are gone)."""
    deadline = time.monotonic() + timeout
    while any(alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    return [p for p in pids if alive(p)]


def kill_ours(pids: list[int]) -> None:
    """Children a failed test left behind, by pid (only while they are still our workers)."""
    for pid in pids:
        with contextlib.suppress(OSError):
            if "--supervised-by" in Path(f"/proc/{pid}/cmdline").read_text():
                os.kill(pid, signal.SIGKILL)


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")
def test_children_waiting_for_the_world_end_when_the_supervisor_is_killed(
    cli: Cli, spawn: Callable[..., Background]
) -> None:
    unreachable(cli)
    sup = worker(spawn, 2)
    pids = waiting_children(sup, 2)
    try:
        os.kill(sup.proc.pid, signal.SIGKILL)
        sup.proc.wait(10)
        assert gone(pids, 15) == [], sup.output()[1]
    finally:
        kill_ours(pids)


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")
def test_sigterm_while_the_children_wait_for_the_world_stops_them_all_cleanly(
    cli: Cli, spawn: Callable[..., Background]
) -> None:
    unreachable(cli)
    sup = worker(spawn, 2)
    pids = waiting_children(sup, 2)
    try:
        assert sup.stop(signal.SIGTERM, timeout=30) == 0
        assert gone(pids, 15) == []
        _, err = sup.output()
        assert err.count("SIGTERM while waiting for the world: worker stopped") == 2, err
        assert "Traceback" not in err
        assert "stopped (exit 0)" in err
    finally:
        kill_ours(pids)


def test_sigterm_while_a_lone_worker_waits_for_the_world_is_a_clean_stop(
    cli: Cli, spawn: Callable[..., Background]
) -> None:
    unreachable(cli)
    lone = worker(spawn, 1)
    lone.wait_for(REACHING, timeout=30)
    assert lone.stop(signal.SIGTERM, timeout=30) == 0
    _, err = lone.output()
    assert "SIGTERM while waiting for the world: worker stopped" in err
    assert "Traceback" not in err


def test_a_child_whose_supervisor_is_already_gone_stops_before_opening_the_world(
    cli: Cli,
) -> None:
    # The supervisor died between starting this child and its asking for the parent-death
    # signal, so no signal will come: pid 1 is not our parent, as after a re-parenting.
    unreachable(cli)
    done = cli("worker", "--app", str(PID_FLOWS), "--processes", "1", "--supervised-by", "1")
    assert done.returncode == 0, done.stderr
    assert "the supervisor is gone: stopping" in done.stderr
    assert REACHING not in done.stderr


ORPHANED_LATER = """
import logging, os, sys
import wayline.cli.commands as commands
from wayline.cli import main

commands.die_with_parent = lambda signum: False  # as where prctl is missing
parent, waiting = os.getppid(), []

class Waiting(logging.Filter):
    def filter(self, record):
        waiting.append("is not reachable yet" in record.getMessage())
        return True

logging.getLogger("wayline.cli").addFilter(Waiting())
os.getppid = lambda: 1 if any(waiting) else parent  # re-parented once it waits for the world
sys.exit(main(["worker", "--app", sys.argv[1], "--world", sys.argv[2], "--processes", "1",
               "--supervised-by", str(parent)]))
"""


def test_without_the_parent_death_signal_an_orphan_still_stops_while_waiting_for_the_world(
    cli: Cli,
) -> None:
    unreachable(cli)
    done = subprocess.run(
        [sys.executable, "-c", ORPHANED_LATER, str(PID_FLOWS), cli.world],
        cwd=cli.cwd,
        env=cli.env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert REACHING in done.stderr  # it was waiting when the supervisor went
    assert "the supervisor is gone: stopping" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_draining_child_finishes_its_drain_when_the_supervisor_is_then_killed(
    world_cli: Cli, spawn: Callable[..., Background]
) -> None:
    # The kernel's parent-death signal reaches a child that drains already; it is not a
    # second signal that exits at once, so the step in flight ends and is recorded.
    sup = worker(spawn, 2)
    pids = list(children(sup, 2).values())
    try:
        run_ids = asyncio.run(start_runs(world_cli.world, ["s0"], 3.0))
        until_started(world_cli, sup, "s0")
        os.kill(sup.proc.pid, signal.SIGTERM)
        sup.wait_for("SIGTERM: stopping 2 worker processes")
        os.kill(sup.proc.pid, signal.SIGKILL)
        sup.proc.wait(10)
        assert gone(pids, 30) == [], sup.output()[1]
        assert ledger(world_cli) == ["s0"]  # its body ended: the drain was not cut short
        assert "second signal" not in sup.output()[1]
    finally:
        kill_ours(pids)
    again = worker(spawn, 1)
    children(again, 1)
    assert len(asyncio.run(results(world_cli.world, run_ids))) == 1
    assert ledger(world_cli) == ["s0"]  # and it ran once
    assert again.stop() == 0


def test_a_second_sigterm_to_the_supervisor_still_ends_the_drains_at_once(
    cli: Cli, spawn: Callable[..., Background]
) -> None:
    # A second SIGTERM passed on by a live supervisor still exits a draining child at once
    # (the parent-death signal is another one, which a draining child ignores).
    cli.env["WAYLINE_TEST_LEDGER"] = str(cli.cwd / "ledger")
    sup = worker(spawn, 2, "--shutdown-grace", "120")
    pids = list(children(sup, 2).values())
    try:
        asyncio.run(start_runs(cli.world, ["long"], 120.0))
        until_started(cli, sup, "long")
        os.kill(sup.proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + 30
        while sup.output()[1].count("SIGTERM: stopping (in-flight") < 2:  # both heard the first
            assert time.monotonic() < deadline, sup.output()[1]
            time.sleep(0.02)
        os.kill(sup.proc.pid, signal.SIGTERM)
        assert sup.proc.wait(60) == 130
        assert gone(pids, 10) == []
        assert "wayline: second signal, exiting now" in sup.output()[1]
    finally:
        kill_ours(pids)


# --- Ctrl-C: the terminal signals the whole foreground process group -----------------------
@pytest.fixture
def spawn_job(cli: Cli) -> Iterator[Callable[..., Background]]:
    """``wayline ...`` started as a shell starts a foreground job: the leader of its own
    process group, so ``os.killpg`` reaches what the terminal's Ctrl-C would (and not pytest).
    Forked from the CLI zygote as ``spawn``'s are (the zygote makes the child a group leader
    before ``start`` returns), else a new interpreter; each is stopped by its pid afterwards."""
    started: list[Background] = []

    def start(*args: str) -> Background:
        n = len(started)
        out, err = cli.cwd / f"job{n}.out", cli.cwd / f"job{n}.err"
        argv = cli.argv(*args)
        zygote = zygote_for(cli.env, argv)
        proc: subprocess.Popen[str] | Forked
        if zygote is not None:
            out.touch()
            err.touch()
            proc = zygote.spawn(
                argv, cli.env, err, cwd=cli.cwd, stdout=out, stderr=err, process_group=True
            )
        else:
            with out.open("w") as o, err.open("w") as e:
                proc = subprocess.Popen(
                    argv,
                    cwd=cli.cwd,
                    env=cli.env,
                    stdout=o,
                    stderr=e,
                    text=True,
                    process_group=0,
                )
        bg = Background(proc, out, err)
        started.append(bg)
        return bg

    yield start
    for bg in started:
        bg.stop(signal.SIGKILL if bg.proc.poll() is None else signal.SIGTERM)


def ctrl_c(bg: Background) -> None:
    """The terminal's SIGINT: to every process of the job's group."""
    os.killpg(bg.proc.pid, signal.SIGINT)


def pid_job(spawn_job: Callable[..., Background], processes: int) -> Background:
    return spawn_job(
        "worker",
        "--app",
        str(PID_FLOWS),
        "--processes",
        str(processes),
        "--flow-concurrency",
        "1",
        "--step-concurrency",
        "1",
    )


@pytest.mark.skipif(not hasattr(os, "killpg"), reason="process groups")
def test_one_ctrl_c_drains_every_child_once_and_the_step_in_flight_finishes(
    world_cli: Cli, spawn: Callable[..., Background], spawn_job: Callable[..., Background]
) -> None:
    sup = pid_job(spawn_job, 2)
    pids = list(children(sup, 2).values())
    try:
        run_ids = asyncio.run(start_runs(world_cli.world, ["c0"], 2.0))
        until_started(world_cli, sup, "c0")
        ctrl_c(sup)
        code = sup.proc.wait(60)
        _, err = sup.output()
        assert ledger(world_cli) == ["c0"], err  # the body in flight ended: it was drained
        assert "second signal" not in err
        assert "did not drain cleanly" not in err
        assert " ERROR " not in err
        assert err.count("SIGINT: stopping (in-flight") == 2, err  # each child heard it once
        assert err.count("worker stopped") == 2, err
        assert code == 0, err  # as a lone worker's drain after SIGINT
        assert "stopped (exit 0)" in err
        assert gone(pids, 10) == []
    finally:
        kill_ours(pids)
    again = worker(spawn, 1)
    children(again, 1)
    assert len(asyncio.run(results(world_cli.world, run_ids))) == 1
    assert ledger(world_cli) == ["c0"]  # and it ran once
    assert again.stop() == 0


@pytest.mark.skipif(not hasattr(os, "killpg"), reason="process groups")
@pytest.mark.parametrize("processes", [1, 2])
def test_ctrl_c_on_an_idle_worker_is_a_clean_stop(
    spawn_job: Callable[..., Background], processes: int
) -> None:
    sup = pid_job(spawn_job, processes)
    if processes == 1:
        sup.wait_for(" ready on ", timeout=30)
        pids = [sup.proc.pid]
    else:
        pids = list(children(sup, processes).values())
    try:
        ctrl_c(sup)
        code = sup.proc.wait(60)
        _, err = sup.output()
        assert "second signal" not in err
        assert "did not drain cleanly" not in err
        assert " ERROR " not in err
        assert err.count("SIGINT: stopping (in-flight") == processes, err
        assert err.count("worker stopped") == processes, err
        assert code == 0, err
        assert gone(pids, 10) == []
    finally:
        kill_ours(pids)


@pytest.mark.skipif(not hasattr(os, "killpg"), reason="process groups")
def test_a_second_ctrl_c_still_ends_the_drains_at_once(
    cli: Cli, spawn_job: Callable[..., Background]
) -> None:
    cli.env["WAYLINE_TEST_LEDGER"] = str(cli.cwd / "ledger")
    sup = spawn_job(
        "worker", "--app", str(PID_FLOWS), "--processes", "2", "--shutdown-grace", "120"
    )
    pids = list(children(sup, 2).values())
    try:
        asyncio.run(start_runs(cli.world, ["long"], 120.0))
        until_started(cli, sup, "long")
        ctrl_c(sup)
        deadline = time.monotonic() + 30
        while sup.output()[1].count("SIGINT: stopping (in-flight") < 2:  # both heard the first
            assert time.monotonic() < deadline, sup.output()[1]
            time.sleep(0.02)
        assert "second signal" not in sup.output()[1]
        ctrl_c(sup)
        assert sup.proc.wait(60) == 130
        assert gone(pids, 10) == []
        assert "wayline: second signal, exiting now" in sup.output()[1]
        assert "long" not in ledger(cli)  # cut off, not waited for
    finally:
        kill_ours(pids)


def test_a_sighup_sent_by_hand_to_a_child_is_ignored_while_its_supervisor_lives(
    world_cli: Cli, spawn: Callable[..., Background]
) -> None:
    """SIGHUP is a child's parent-death signal, but anyone can send it: a child whose
    supervisor is alive says so and goes on serving (it was stopped and replaced before)."""
    sup = worker(spawn, 2)
    pids = children(sup, 2)
    target = pids[0]
    os.kill(target, signal.SIGHUP)
    deadline = time.monotonic() + 30
    while "SIGHUP ignored" not in sup.output()[1]:
        assert time.monotonic() < deadline, sup.output()[1]
        time.sleep(0.05)
    keys = [f"h{i}" for i in range(6)]
    ran_in = asyncio.run(run_all(world_cli.world, keys, 0.3))
    assert target in ran_in  # the child that got SIGHUP still takes runs
    assert sorted(ledger(world_cli)) == sorted(keys)
    _, err = sup.output()
    assert f"SIGHUP ignored: the supervisor (pid {sup.proc.pid}) is alive" in err, err
    assert "the supervisor is gone" not in err, err
    assert "starting another" not in err, err
    assert sup.stop(signal.SIGTERM, timeout=60) == 0
    assert "stopped (exit 0)" in sup.output()[1]
