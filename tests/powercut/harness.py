"""One power cut, measured: start a workload on a store on the power-loss mount, cut the power
while acknowledgements are coming in, restart on what the disk kept, and compare.

What was acknowledged is what the driver wrote to its acks file (outside the mount) before it
died; what survived is each run's log read right after the restart, before any worker writes
again. Then a fresh worker finishes the runs (the hooks still open get their payload again),
and the bodies file (outside the mount too) tells which step bodies ran after the cut."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import signal
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Protocol, TypeVar

import wayline
from tests.powercut.mount import LazyMount
from tests.powercut.workload import hook_token, open_world
from tests.servers import dying_with_us
from wayline._core.events import RUN_TERMINAL_EVENTS, Event, EventType
from wayline.world import World

ROOT = Path(__file__).resolve().parents[2]
T = TypeVar("T")


class Store(Protocol):
    target: str

    def start(self) -> None: ...

    def kill(self) -> None: ...


Fault = Callable[[list[subprocess.Popen[bytes]], Path], Awaitable[None]]
"""A cut given the workload's processes and its acks file: it must end with those processes
dead (``kill``) and every mount cut or up."""


@dataclasses.dataclass
class Figures:
    acked: int = 0
    lost: list[str] = dataclasses.field(default_factory=list)
    """Acknowledgements whose event the restarted store no longer has."""
    runs_lost: int = 0
    """Runs whose start was acknowledged and which the restarted store does not know."""
    rerun_after_recorded: int = 0
    """Step bodies that ran after the restart though the kept log records their completion."""
    rerun_after_acked: int = 0
    """Step bodies that ran after the restart though a caller had seen their completion."""
    stuck: int = 0
    """Runs the store kept that neither ended nor wait on anything within the bound."""
    recovery_seconds: float = 0.0
    """From the restart of the store to the end of every run it kept."""
    batched: int = 0
    """Stored messages of the kept runs that came in an atomic batch (NATS, gathered appends)."""

    @property
    def lost_percent(self) -> float:
        return 100.0 * len(self.lost) / self.acked if self.acked else 0.0

    def line(self) -> str:
        return (
            f"acked {self.acked}, lost {len(self.lost)} ({self.lost_percent:.1f}%), runs lost "
            f"{self.runs_lost}, re-run after recorded completion {self.rerun_after_recorded}, "
            f"after acknowledged completion {self.rerun_after_acked}, stuck {self.stuck}, "
            f"recovery {self.recovery_seconds:.1f} s"
        )


@contextmanager
def processes() -> Iterator[list[subprocess.Popen[bytes]]]:
    procs: list[subprocess.Popen[bytes]] = []
    try:
        yield procs
    finally:
        kill(procs)


def kill(procs: list[subprocess.Popen[bytes]]) -> None:
    for proc in procs:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
    for proc in procs:
        proc.wait(timeout=10)
        if proc.stdout is not None:
            proc.stdout.close()
    procs.clear()


def spawn(procs: list[subprocess.Popen[bytes]], log: Path, *args: str) -> None:
    """Start a workload process and wait until it says it is ready; one that exits first (a
    cluster whose streams have no leader yet) is started again, three times at most."""
    for _ in range(3):
        with open(log, "ab") as err:
            proc = subprocess.Popen(
                dying_with_us([sys.executable, "-m", "tests.powercut.workload", *args]),
                cwd=ROOT,
                stdout=subprocess.PIPE,
                stderr=err,
            )
        procs.append(proc)
        assert proc.stdout is not None
        if proc.stdout.readline().strip() in (b"worker ready", b"driver started"):
            return
        proc.wait(timeout=10)
    raise AssertionError(f"{args[0]} failed: {tail(log)}")


async def steps_acked(acks: Path, n: int, log: Path, bound: float = 30.0) -> None:
    deadline = time.monotonic() + bound
    while sum(a.startswith("step ") for a in lines(acks)) < n:
        assert time.monotonic() < deadline, f"no progress: {tail(log)}"
        await asyncio.sleep(0.02)


def tail(log: Path) -> str:
    return log.read_text()[-3000:] if log.exists() else ""


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


async def cut_once(
    disks: list[LazyMount],
    store: Store,
    work: Path,
    *,
    runs: int,
    steps: int,
    cut_after: int,
    fault: Fault | None = None,
) -> Figures:
    try:
        return await _cut_once(disks, store, work, runs, steps, cut_after, fault)
    finally:
        store.kill()


async def _cut_once(
    disks: list[LazyMount],
    store: Store,
    work: Path,
    runs: int,
    steps: int,
    cut_after: int,
    fault: Fault | None,
) -> Figures:
    acks, bodies, log = work / "acks", work / "bodies", work / "procs.log"
    store.start()
    with processes() as procs:
        spawn(procs, log, "worker", store.target)
        spawn(procs, log, "driver", store.target, str(acks), str(bodies), str(runs), str(steps))
        await steps_acked(acks, cut_after, log)
        if fault is None:
            # The cut: every process writing to the mounts dies at once, then the disks' caches.
            kill(procs)
            store.kill()
            for disk in disks:
                disk.cut()
        else:
            await fault(procs, acks)
    acked = lines(acks)
    before = len(lines(bodies))
    restarted = time.monotonic()
    for disk in disks:
        if not disk.up:
            disk.start()
    store.start()
    figures = Figures(acked=len(acked))
    started = [a.split()[1] for a in acked if a.startswith("start ")]
    with processes() as procs:
        world = await patiently(lambda: _started(store.target))
        try:
            client = wayline.Client(world)
            kept = {run: await patiently(client.handle(run).events) for run in started}
            figures.lost = [a for a in acked if not _kept(a, kept)]
            figures.runs_lost = sum(not events for events in kept.values())
            figures.batched = await _batched(world, started)
            spawn(procs, log, "worker", store.target)
            figures.stuck = await _finish(client, [r for r, e in kept.items() if e])
            figures.recovery_seconds = time.monotonic() - restarted
        finally:
            await world.close()
    recorded = {
        (e.run_id, str(e.correlation_id))
        for events in kept.values()
        for e in events
        if e.type is EventType.STEP_COMPLETED
    }
    seen = {tuple(a.split()[1:3]) for a in acked if a.startswith("step ")}
    for body in lines(bodies)[before:]:
        run, step, _ = body.split()
        figures.rerun_after_recorded += (run, step) in recorded
        figures.rerun_after_acked += (run, step) in seen
    return figures


async def _batched(world: World, runs: list[str]) -> int:
    """How many stored messages of ``runs`` came in an atomic batch (0 off NATS)."""
    from tests.nats_fixtures import stored_headers
    from wayline.worlds.nats import NatsWorld

    if not isinstance(world, NatsWorld):
        return 0
    count = 0
    for run in runs:
        count += sum("Nats-Batch-Id" in headers for headers in await stored_headers(world, run))
    return count


async def _started(target: str) -> World:
    world = open_world(target)
    try:
        await world.start()
    except BaseException:
        await world.close()
        raise
    return world


async def patiently(call: Callable[[], Awaitable[T]], bound: float = 30.0) -> T:
    """``call()``, again while the world is unavailable (a cluster electing its stream
    leaders after a restart), as a caller would, for at most ``bound`` seconds."""
    deadline = time.monotonic() + bound
    while True:
        try:
            return await call()
        # (TimeoutError too: a NatsWorld's start lets nats' own timeout through.)
        except (wayline.WorldUnavailableError, TimeoutError):
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.5)


def _kept(ack: str, kept: dict[str, list[Event]]) -> bool:
    kind, run, *rest = ack.split()
    events = kept.get(run, [])
    match kind:
        case "start":
            return bool(events)
        case "step":
            return any(
                e.type is EventType.STEP_COMPLETED and str(e.correlation_id) == rest[0]
                for e in events
            )
        case "hook":
            return any(e.type is EventType.HOOK_RECEIVED for e in events)
        case "cancel":
            return any(e.type is EventType.RUN_CANCEL_REQUESTED for e in events)
        case _:
            return any(str(e.type) == rest[0] for e in events)


async def _finish(client: wayline.Client, runs: list[str], bound: float = 40.0) -> int:
    """Drive every kept run to its end (a hook whose payload the cut lost gets it again);
    returns how many did not end within ``bound`` seconds."""
    deadline = time.monotonic() + bound
    open_runs = set(runs)
    while open_runs and time.monotonic() < deadline:
        for run in list(open_runs):
            events = await patiently(client.handle(run).events)
            if any(e.type in RUN_TERMINAL_EVENTS for e in events):
                open_runs.discard(run)
            elif any(e.type is EventType.HOOK_CREATED for e in events) and not any(
                e.type is EventType.HOOK_RECEIVED for e in events
            ):
                try:
                    await patiently(lambda run=run: client.resume_hook(hook_token(run), 1))
                except wayline.HookNotFoundError:
                    pass
        await asyncio.sleep(0.1)
    return len(open_runs)
