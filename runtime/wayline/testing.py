"""Time-skipping tests (Temporal's ``WorkflowEnvironment.start_time_skipping``, the reference
runtime's ``wakeUp``).

    async with wayline.testing.Environment([subscription]) as env:
        handle = await env.client.start(subscription, "ana")
        assert await handle.result(timeout=10) == "renewed"   # it slept 30 days

The environment is an embedded world in a temporary directory and a worker, in this process.
Whenever every run is idle -- no queue message is due or being handled -- the clock jumps to the
next timer (a sleep's wake, a step's retry, a hook's timeout), so a workflow that sleeps for a
month finishes in milliseconds. The jump moves the clock the world stamps events with and the
engine compares with, so ``wayline.now()`` inside the workflow sees the month pass, exactly as
it would in production; nothing in the log is a lie about time.

Like Temporal's, auto-skipping also skips hook timeouts: resume the hook before the workflow
suspends on it, or hold the clock with ``env.paused()`` while the test gets ready. The clock is
process-wide: run one environment at a time and no other world in the same process meanwhile.
"""

from __future__ import annotations

import asyncio
import contextlib
import tempfile
from collections.abc import AsyncIterator, Iterable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import Any

from ._core import clock
from ._core.definitions import StepDefinition, WorkflowDefinition
from ._core.histories import History, ReplayResult, check, parse_history
from ._engine.step_runner import idempotency_key as step_key
from ._sdk.context import StepContext, entered
from .client import Client
from .durations import Duration, to_seconds
from .errors import ReplayDivergenceError
from .settings import Settings
from .worker import Worker
from .worlds.local import LocalWorld

__all__ = ["Environment", "History", "ReplayResult", "TimeSkippingWorld", "replay", "step_context"]

TEST_RUN_ID = "wf_" + "0" * 32
"""The run id a step context made for a unit test has unless it is given one."""


class TimeSkippingWorld(LocalWorld):
    """The embedded world, able to say whether anything is due or in flight, and when the
    next queued message comes due."""

    def queue_state(self) -> tuple[bool, float | None]:
        """``(busy, next_due)``: busy when a message is due now or held by a consumer."""
        now = clock.now()
        rows = self._read(
            "SELECT "
            "  SUM(CASE WHEN available_at <= ? OR holder IS NOT NULL THEN 1 ELSE 0 END), "
            "  MIN(CASE WHEN holder IS NULL THEN available_at END) "
            "FROM messages",
            (now,),
        )
        busy_count, next_due = rows[0] if rows else (0, None)
        return bool(busy_count), next_due

    def wake_consumers(self) -> None:
        self._wake()


class Environment:
    """A world, a client and a worker whose clock skips ahead when every run is idle."""

    def __init__(
        self,
        workflows: Iterable[WorkflowDefinition[..., Any]],
        *,
        path: str | Path | None = None,
        settings: Settings | None = None,
        auto_skip: bool = True,
        idle_checks: int = 3,
        check_interval: Duration = 0.005,
    ) -> None:
        self._interval = to_seconds(check_interval)  # a bad one is refused before anything opens
        self._workflows = list(workflows)
        self._path = path
        self._settings = settings or Settings.from_env({})
        self.auto_skip = auto_skip
        self._idle_checks = idle_checks
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        self._skipper: asyncio.Task[None] | None = None
        self._paused = 0
        self.skipped = 0.0
        """Seconds the clock has been moved ahead so far."""
        self.world: TimeSkippingWorld
        self.client: Client
        self.worker: Worker

    async def __aenter__(self) -> Environment:
        if clock.offset():
            raise RuntimeError("another time-skipping environment is running in this process")
        if self._path is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="wayline-test-")
            self._path = Path(self._tmp.name) / "wayline.db"
        self.world = TimeSkippingWorld(self._path, poll_interval=0.01)
        await self.world.start()
        self.client = Client(self.world, self._workflows)
        self.worker = Worker(self.world, self._workflows, settings=self._settings)
        await self.worker.start()
        self._skipper = asyncio.create_task(self._skip_loop(), name="wayline-time-skipper")
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._skipper is not None:
            self._skipper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._skipper
        try:
            await self.worker.close()
            await self.world.close()
        finally:
            clock.reset()
            if self._tmp is not None:
                self._tmp.cleanup()

    def now(self) -> datetime:
        """The environment's time (what the world stamps events with)."""
        return datetime.fromtimestamp(clock.now(), UTC)

    def skip(self, duration: Duration) -> None:
        """Move the clock ahead by ``duration`` now, idle or not."""
        seconds = to_seconds(duration)
        clock.advance(seconds)
        self.skipped += seconds
        self.world.wake_consumers()

    @contextlib.contextmanager
    def paused(self) -> Any:
        """Hold the clock (no auto-skip) inside the block."""
        self._paused += 1
        try:
            yield
        finally:
            self._paused -= 1

    async def _skip_loop(self) -> None:
        idle_seen, last_due = 0, None
        while True:
            await asyncio.sleep(self._interval)
            if not self.auto_skip or self._paused:
                idle_seen = 0
                continue
            busy, next_due = self.world.queue_state()
            if busy or next_due is None:  # a held message is a delivery being handled
                idle_seen = 0
                continue
            # Idle several checks in a row with the same next timer: not a gap between a
            # write and its enqueue.
            idle_seen = idle_seen + 1 if next_due == last_due else 1
            last_due = next_due
            if idle_seen < self._idle_checks:
                continue
            ahead = next_due - clock.now()
            if ahead > 0:
                self.skip(ahead + 0.001)
            idle_seen = 0


@contextlib.asynccontextmanager
async def environment(
    workflows: Iterable[WorkflowDefinition[..., Any]], **options: Any
) -> AsyncIterator[Environment]:
    """``async with wayline.testing.environment([...]) as env`` (a function spelling)."""
    async with Environment(workflows, **options) as env:
        yield env


@contextlib.contextmanager
def step_context(
    step: StepDefinition[..., Any] | str = "step",
    *,
    run_id: str = TEST_RUN_ID,
    step_id: str = "s1",
    attempt: int = 1,
    occurrence: int = 0,
    idempotency_key: str | None = None,
    started_at: datetime | None = None,
    forward_result: Any = None,
) -> Iterator[StepContext]:
    """Call a step's function in a unit test as a worker would, for its ``step_context()``::

        with wayline.testing.step_context(charge, attempt=2) as ctx:
            receipt = await charge("o-1", 1250)   # outside a workflow: the plain function
        assert receipt.key == ctx.idempotency_key

    ``step`` is the step (or its name); a compensation step (``charge.compensation``) gets the
    compensation's context: ``direction="compensate"``, its own key, the forward step's key and
    ``forward_result``. The idempotency key is the one a worker derives from the run id, the
    step's name and ``occurrence`` (which call of that step in the run, from 0) unless
    ``idempotency_key`` is given; ``started_at`` is now unless given. The context holds for the
    block (in the task or thread that enters it) and the one before is back after it."""
    forward = step.compensates if isinstance(step, StepDefinition) else None
    name = step if isinstance(step, str) else (forward or step).name
    direction = "forward" if forward is None else "compensate"
    ctx = StepContext(
        run_id=run_id,
        step_name=name,
        step_id=step_id,
        attempt=attempt,
        idempotency_key=idempotency_key or step_key(run_id, name, occurrence, direction),
        direction=direction,
        forward_idempotency_key=None if forward is None else step_key(run_id, name, occurrence),
        forward_result=forward_result,
        started_at=started_at or datetime.now(UTC),
    )
    with entered(ctx):
        yield ctx


def replay(
    histories: str | Path | Iterable[History | str],
    workflows: Iterable[WorkflowDefinition[..., Any]],
    *,
    raise_on_failure: bool = True,
) -> list[ReplayResult]:
    """Replay recorded histories against ``workflows`` with no world (Temporal's
    ``Replayer``), as ``wayline replay`` does: a file of ``wayline runs export`` lines, or the
    lines or :class:`History` values themselves. Each result says ``ok``, ``diverged`` (the
    message a worker would record), ``not served`` (the run is pinned to another definition
    identity) or ``unknown workflow``. With ``raise_on_failure`` the first result that is not
    ``ok`` raises :class:`ReplayDivergenceError` carrying it (``details["result"]``)::

        def test_the_new_code_replays_production_runs() -> None:
            wayline.testing.replay(Path(__file__).parent / "histories.jsonl", [orders])
    """
    if isinstance(histories, str | Path):
        where = str(histories)
        lines: Iterable[History | str] = Path(histories).read_text(encoding="utf-8").splitlines()
    else:
        where, lines = "history", histories
    known = list(workflows)
    results: list[ReplayResult] = []
    for number, item in enumerate(lines, 1):
        if isinstance(item, str):
            if not item.strip():
                continue
            item = parse_history(item, f"{where}:{number}")
        results.append(check(item, known))
    failed = next((r for r in results if not r.ok), None)
    if raise_on_failure and failed is not None:
        raise ReplayDivergenceError(str(failed), result=failed)
    return results
