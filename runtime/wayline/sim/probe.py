"""The invariants a seed is judged by (README "The guarantee, plainly", docs/ownership.md,
docs/durability.md): some are watched as step bodies run, the rest read from the log at the
end.

Watched as bodies run (the workload's bodies call :meth:`Probe.body`):
no body of a step after its completion was recorded, no two bodies of one step at once, no
compensation of a step whose body never ran or still runs, and never more bodies of a limited
step than its ``max``; no step started while its run was paused. Read from the log at the end
(:meth:`Probe.judge_logs`): one terminal event per step and per run (a redrive re-opens one),
each hook delivery id received once, every run ended or visibly waiting (a hook or a timer it
waits for, or a state an operator must act on), and the invariants of the later features in
:mod:`.feature_checks`.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from .._core.events import (
    HOOK_ACTIVE,
    WAIT_WAITING,
    Event,
    EventType,
    RunStatus,
)
from .._core.projections import RunInfo
from .._sdk.context import step_context
from ..worlds.memory import MemoryStore
from . import feature_checks
from .feature_checks import Seen
from .loop import PROCESS
from .trace import Trace

VISIBLY_STUCK = frozenset({RunStatus.COMPENSATION_STUCK, RunStatus.BLOCKED})
"""States that wait for an operator, and say so: a run left there is not lost."""


def waits_for_operator(info: RunInfo) -> bool:
    """The run waits for an operator, and says so. A run blocked by a rate limit is not: its
    token falls due by itself, so the seed waits for it."""
    if info.status not in VISIBLY_STUCK:
        return False
    return (info.error or {}).get("waitingFor") != "rate_limit"


@dataclass(slots=True)
class Body:
    process: int
    name: str


@dataclass
class Probe:
    store: MemoryStore
    trace: Trace
    limits: dict[str, int] = field(default_factory=dict)
    """Step name to its concurrency ``max``."""
    violations: list[str] = field(default_factory=list)
    running: dict[tuple[str, str], Body] = field(default_factory=dict)
    keys_ran: set[str] = field(default_factory=set)
    keys_running: dict[str, int] = field(default_factory=dict)
    bodies: int = 0
    seen: Seen = field(default_factory=Seen)
    rates: dict[str, tuple[float, int]] = field(default_factory=dict)
    """Bucket key to its (tokens a second, burst)."""
    debounce_period: float = 0.0
    """The period of the debounced workflow ``sim.reindex``, in seconds."""

    def violate(self, what: str) -> None:
        self.trace.note(f"VIOLATION {what}")
        self.violations.append(what)

    @contextlib.asynccontextmanager
    async def body(self, name: str) -> AsyncIterator[None]:
        """Around one step body: judge its start, and keep it counted while it runs."""
        ctx = step_context()
        where = (ctx.run_id, ctx.step_id)
        label = f"{name} {ctx.run_id[-6:]}/{ctx.step_id} #{ctx.attempt}"
        self.trace.note(f"p{PROCESS.get()} body {label} begins")
        self.bodies += 1
        if where in self.running:
            self.violate(
                f"two bodies of {label} overlap (the other in p{self.running[where].process})"
            )
        if self._completed(*where):
            self.violate(f"body of {label} began after its completion was recorded")
        log = self.store.logs.get(ctx.run_id, [])
        paused = feature_checks.paused_when_started(log, ctx.step_id)
        if paused is not None:
            self.violate(f"body of {label} was started while its run was paused (#{paused})")
        redrives = sum(1 for e in log if e.type is EventType.RUN_REDRIVEN)
        self.seen.bodies.append((ctx.run_id, name, redrives))
        forward = ctx.forward_idempotency_key
        if forward is not None:
            if forward not in self.keys_ran:
                self.violate(f"compensation {label} of a step whose body never ran")
            elif self.keys_running.get(forward):
                self.violate(f"compensation {label} while its step's body still runs")
        limit = self.limits.get(name)
        if limit is not None:
            live = sum(1 for b in self.running.values() if b.name == name) + 1
            if live > limit:
                self.violate(f"{live} bodies of {name} at once, above its max of {limit}")
        self.running[where] = Body(PROCESS.get(), name)
        key = ctx.idempotency_key
        self.keys_ran.add(key)
        self.keys_running[key] = self.keys_running.get(key, 0) + 1
        try:
            yield
        finally:
            self.trace.note(f"p{PROCESS.get()} body {label} ends")
            self.running.pop(where, None)
            self.keys_running[key] = self.keys_running.get(key, 1) - 1

    def token(self, key: str, holder: str | None, at: float) -> None:
        """The world gave ``holder`` a token of ``key`` at world time ``at``."""
        self.seen.tokens.setdefault(key, []).append((at, holder or ""))

    def took_unpinned(self, process: int, run_id: str) -> None:
        """The draining process ``process`` began run ``run_id``, which nothing pinned yet."""
        self.violate(f"draining p{process} took run {run_id[-6:]}, not pinned to it")

    def indexed(self, run_id: str, version: str) -> None:
        """A ``sim.index`` body of run ``run_id`` ran with ``version``."""
        self.seen.indexed.setdefault(run_id, []).append(version)

    def crashed(self, process: int) -> None:
        """The process is gone, and its bodies with it."""
        for where, body in list(self.running.items()):
            if body.process == process:
                del self.running[where]
        # Which keys those were is not tracked per process: a crash is rare, so count again.
        self.keys_running = {}

    def _completed(self, run_id: str, step_id: str) -> bool:
        return any(
            e.type is EventType.STEP_COMPLETED and e.correlation_id == step_id
            for e in self.store.logs.get(run_id, ())
        )

    def judge_logs(self) -> None:
        for run_id, log in sorted(self.store.logs.items()):
            self._judge_log(run_id, log)
            workflow = log[0].data.get("workflow") if log else None
            if workflow == "sim.pacer":
                feature_checks.check_paced_log(run_id, log, self.seen, "sim.paced", self.violate)
            elif workflow == "sim.reindex":
                feature_checks.check_debounced_log(
                    run_id, log, self.seen, self.debounce_period, self.violate
                )
        feature_checks.check_tokens(self.seen, self.rates, self.violate)
        feature_checks.check_chain(self.store, self.violate)
        feature_checks.check_rerun_bodies(self.store, self.seen, "prepare", self.violate)

    def _judge_log(self, run_id: str, log: list[Event]) -> None:
        short = run_id[-6:]
        # One end per run, and one per step, but for a redriven run: the redrive re-opens
        # the run and its failed step, which end again (feature_checks.check_redrives).
        feature_checks.check_redrives(run_id, log, self.violate)
        received: dict[tuple[str, str], int] = {}
        for e in log:
            delivery = e.data.get("deliveryId")
            if e.type is EventType.HOOK_RECEIVED and isinstance(delivery, str):
                k = (str(e.correlation_id), delivery)
                received[k] = received.get(k, 0) + 1
        for (cid, delivery), n in sorted(received.items()):
            if n > 1:
                self.violate(f"hook {short}/{cid} received delivery {delivery} {n} times")
        info = self.store.runs.get(run_id)
        if info is None or info.status.terminal or waits_for_operator(info):
            return
        entities = self.store.entities.get(run_id, {})
        if not any(s in (HOOK_ACTIVE, WAIT_WAITING) for s in entities.values()):
            self.violate(f"run {short} is {info.status} and waits for nothing visible")
