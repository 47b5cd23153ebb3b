"""One seed, start to end: the world, the worker processes, the faults and the clients, all
on one :class:`~.loop.VirtualLoop` and all drawn from ``random.Random(seed)``; then the
invariants. The same seed gives the same trace, byte for byte, in any process started with
the same ``PYTHONHASHSEED``."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import logging
import random
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import Any

from .._core.definitions import WorkflowDefinition
from ..client import Client
from ..settings import Settings
from ..worker import Worker
from ..worlds.memory import MemoryStore
from . import conflicts, drivers, flows, long_steps, workload
from .clocks import ClockPlan, Clocks
from .determinism import patched
from .faults import FaultPlan, FaultyWorld
from .loop import PROCESS, StuckError, VirtualLoop
from .probe import Probe, waits_for_operator
from .trace import Trace

HORIZON = 6 * 3600.0
"""Virtual seconds a seed may take before its runs are judged (a hook times out after
``workload.HOOK_TIMEOUT``)."""
VISIBILITY = 30.0
RUNS = 4
WORKFLOWS = workload.WORKFLOWS + flows.WORKFLOWS


def workflows_of(
    long_plan: long_steps.LongPlan, conflict_plan: conflicts.ConflictPlan | None = None
) -> list[WorkflowDefinition[..., Any]]:
    """The definitions of a seed: the long steps' and the contenders' only in a seed that runs
    them, so that a seed without them runs as it did before they were drawn."""
    contending = conflict_plan is not None and conflict_plan.starts
    return (
        WORKFLOWS
        + ([long_steps.hauler] if long_plan.starts else [])
        + ([conflicts.contender, conflicts.lingerer] if contending else [])
    )


@dataclass(frozen=True, slots=True)
class Outcome:
    seed: int
    plan: FaultPlan
    clocks: ClockPlan
    long_plan: long_steps.LongPlan
    log: Trace
    """What happened, as it was noted; :attr:`trace` is its text."""
    violations: list[str]
    bodies: int
    virtual_seconds: float

    @property
    def ok(self) -> bool:
        return not self.violations

    @property
    def trace(self) -> str:
        """The seed's trace, one line per thing that happened. Made when asked for, not as
        the seed ends: a range of seeds reads only the failing ones'."""
        return self.log.text()


class _Processes:
    """The simulated worker processes: each a world opened on the shared store and a worker,
    every task of it tagged with its process number."""

    def __init__(
        self,
        loop: VirtualLoop,
        store: MemoryStore,
        plan: FaultPlan,
        rng: random.Random,
        trace: Trace,
        probe: Probe,
        clocks: Clocks,
        long_plan: long_steps.LongPlan,
        conflict_plan: conflicts.ConflictPlan,
    ) -> None:
        self.loop, self.store, self.plan, self.rng = loop, store, plan, rng
        self.trace, self.probe, self.clocks = trace, probe, clocks
        self.long_plan, self.conflict_plan = long_plan, conflict_plan
        self.workflows = workflows_of(long_plan, conflict_plan)
        self.workers: dict[int, Worker] = {}
        self.count = 0

    def boot(self, *, draining: bool = False) -> None:
        """Start a worker process; a ``draining`` one is an old version on its way out, which
        drives the runs pinned to it and takes no new run."""
        self.count += 1
        process = self.count
        offset = self.clocks.boot(process)
        took = functools.partial(self.probe.took_unpinned, process) if draining else None
        world = FaultyWorld(
            self.store,
            self.plan,
            self.rng,
            self.trace,
            f"p{process}",
            on_token=self.probe.token,
            on_unpinned_start=took,
            visibility_seconds=VISIBILITY,
            skewed=self.clocks.plan != ClockPlan(),
            outage=self.long_plan.for_process(process),
        )
        settings = Settings.from_env({"WAYLINE_WORKER_DRAINING": "1"} if draining else {})
        worker = Worker(world, self.workflows, settings=settings)
        self.workers[process] = worker
        context = contextvars.copy_context()
        context.run(PROCESS.set, process)
        skewed = f" clock {offset:+.3f}s" if offset else ""
        self.trace.note(f"p{process} boots" + (" draining" if draining else "") + skewed)
        self.loop.create_task(worker.start(), name=f"sim-boot-p{process}", context=context)

    def crash(self) -> None:
        process = self.rng.choice(sorted(self.workers))
        self.workers.pop(process)
        self.loop.crash(process)
        self.probe.crashed(process)
        self.trace.note(f"p{process} crash-stopped")
        self.boot()

    def step_clock(self) -> None:
        """One live worker's clock steps (an NTP step on its host)."""
        process = self.rng.choice(sorted(self.workers))
        self.clocks.step(process)
        self.trace.note(f"p{process} clock steps {self.clocks.plan.step_by:+.3f}s")

    def exited(self, process: int) -> None:
        """A process exited itself (``os._exit``): it is gone, as after a crash."""
        self.trace.note(f"p{process} exits (os._exit)")
        if self.workers.pop(process, None) is not None:
            self.probe.crashed(process)
            self.loop.call_soon(self.boot)


def run_seed(seed: int, *, runs: int = RUNS) -> Outcome:
    rng = random.Random(seed)
    plan = FaultPlan.draw(rng)
    loop = VirtualLoop(random.Random(rng.getrandbits(64)))
    loop.set_exception_handler(lambda _loop, _context: None)
    trace = Trace(loop.elapsed)
    # The store reads the true time; each worker its own clock (clocks.py).
    store = MemoryStore(now=loop.wall)
    clock_plan = ClockPlan.draw(seed)
    clocks = Clocks(loop, clock_plan, random.Random(f"wayline-sim-offsets-{seed}"))
    probe = Probe(
        store,
        trace,
        {**workload.LIMITS, "haul": long_steps.HAUL_MAX},
        rates=dict(flows.RATES),
        debounce_period=flows.DEBOUNCE_SECONDS,
    )
    long_plan = long_steps.LongPlan.draw(seed)
    conflict_plan = conflicts.ConflictPlan.draw(seed)
    processes = _Processes(
        loop,
        store,
        plan,
        random.Random(rng.getrandbits(64)),
        trace,
        probe,
        clocks,
        long_plan,
        conflict_plan,
    )
    trace.note(f"seed {seed}: {plan}")
    if clock_plan != ClockPlan():
        trace.note(f"seed {seed}: {clock_plan}")
    if long_plan != long_steps.LongPlan():
        trace.note(f"seed {seed}: {long_plan}")
    if conflict_plan != conflicts.ConflictPlan():
        trace.note(f"seed {seed}: {conflict_plan}")
    quiet = logging.getLogger("wayline")
    level = quiet.level
    quiet.setLevel(logging.CRITICAL)
    try:
        with patched(loop, random.Random(rng.getrandbits(64)), processes.exited, clocks.local):
            workload.Stage.probe, workload.Stage.rng = probe, random.Random(rng.getrandbits(64))
            workload.Stage.broken = set()
            try:
                loop.run_until_complete(_main(loop, store, processes, rng, trace, probe, runs))
            except StuckError as err:
                probe.violate(str(err))
            probe.judge_logs()
            if conflict_plan.starts:
                conflicts.check(store, trace, probe.violate)
            _end(loop)
    finally:
        quiet.setLevel(level)
        workload.Stage.probe = None
    return Outcome(
        seed, plan, clock_plan, long_plan, trace, probe.violations, probe.bodies, loop.elapsed()
    )


async def _main(
    loop: VirtualLoop,
    store: MemoryStore,
    processes: _Processes,
    rng: random.Random,
    trace: Trace,
    probe: Probe,
    runs: int,
) -> None:
    for _ in range(2):
        processes.boot()
    if rng.random() < 0.25:  # an old version on its way out, beside the current one's
        processes.boot(draining=True)
    client = Client(
        FaultyWorld(store, FaultPlan(), rng, trace, "client", visibility_seconds=VISIBILITY),
        processes.workflows,
    )
    crashes = [
        loop.call_later(rng.uniform(1.0, 60.0), processes.crash)
        for _ in range(processes.plan.crashes)
    ]
    step_at = processes.clocks.plan.step_at
    if step_at is not None:
        crashes.append(loop.call_later(step_at, processes.step_clock))
    orders = [
        workload.drive(client, random.Random(rng.getrandbits(64)), trace, f"o{i}")
        for i in range(runs)
    ]
    # A client without definitions starts runs by name, as `wayline start` does: they are
    # pinned by the first worker that begins them, which must not be a draining one.
    bare = Client(
        FaultyWorld(store, FaultPlan(), rng, trace, "client", visibility_seconds=VISIBILITY)
    )
    features: Awaitable[Any] = drivers.drive(
        client, bare, random.Random(rng.getrandbits(64)), trace, probe
    )
    long_plan = processes.long_plan
    if long_plan.starts:  # nothing more in a seed without them: its ready queue as it was
        features = asyncio.gather(features, long_steps.drive(client, long_plan, trace))
    conflict_plan = processes.conflict_plan
    if conflict_plan.starts:  # the same: a seed without contenders runs as it did
        features = asyncio.gather(features, conflicts.drive(client, conflict_plan, trace))
    await asyncio.gather(*orders, features)
    # A poll, not an event: "every run ended" has no one place that could set one, and a
    # poll on virtual time costs one loop turn per ten seconds.
    while loop.elapsed() < HORIZON and not _settled(store):  # noqa: ASYNC110
        await asyncio.sleep(10.0)
    for timer in crashes:
        timer.cancel()
    trace.note(f"settled after {loop.elapsed():.0f}s virtual" if _settled(store) else "horizon")
    for process, worker in sorted(processes.workers.items()):
        with contextlib.suppress(Exception):
            await asyncio.wait_for(worker.close(), 120.0)
        trace.note(f"p{process} closed")


def _settled(store: MemoryStore) -> bool:
    """Every run ended, or waits for an operator (nothing more happens to it by itself)."""
    return bool(store.runs) and all(
        i.status.terminal or waits_for_operator(i) for i in store.runs.values()
    )


def _end(loop: VirtualLoop) -> None:
    """Let nothing outlive the seed: the tasks of crashed processes are cancelled too, now that
    the seed is judged (their ``finally`` blocks run against a store nobody reads again). A
    task that swallows a cancellation is cancelled again, a few rounds at most."""
    loop.revive_parked()
    for _ in range(5):
        # in the order the tasks were made: the cancels' callbacks run in this order, and the
        # set of tasks iterates in the order of their addresses, which differ run to run
        pending = loop.in_birth_order(t for t in loop.tasks() if not t.done())
        if not pending:
            break
        for task in pending:
            task.cancel()
        with contextlib.suppress(BaseException):
            loop.run_until_complete(asyncio.wait(pending, timeout=60.0))
    left = [t for t in loop.tasks() if not t.done()]
    if left:
        _GRAVEYARD.extend(left)
        del _GRAVEYARD[:-_GRAVEYARD_SIZE]
    loop.run_until_complete(loop.shutdown_asyncgens())
    loop.close()


_GRAVEYARD: list[asyncio.Task[Any]] = []
"""Tasks that would not end: kept from the garbage collector, which would close their
coroutines outside any loop and report what their ``finally`` blocks raise."""
_GRAVEYARD_SIZE = 10_000
