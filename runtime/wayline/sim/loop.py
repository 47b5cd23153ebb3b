"""An asyncio event loop on virtual time, whose every choice comes from one seed.

``time()`` is a number the loop moves itself: its selector never blocks, and when nothing is
ready it jumps the clock to the next timer, so a 30-second visibility timeout costs no real
time. The ready callbacks of one turn run in an order drawn from the seed (asyncio promises no
order between tasks, and an engine that depends on one has a race), and a simulated process
can be crash-stopped: the callbacks of its tasks are parked from then on, so none of its
tasks runs again, not even its ``finally`` blocks.

A process is a ``contextvars`` value (:data:`PROCESS`): a task inherits its creator's, so every
task a worker spawns belongs to the process that started the worker.
"""

from __future__ import annotations

import asyncio
import contextvars
import heapq
import random
import selectors
from asyncio import format_helpers
from asyncio.base_events import (  # type: ignore[attr-defined]
    _MIN_CANCELLED_TIMER_HANDLES_FRACTION,
    _MIN_SCHEDULED_TIMER_HANDLES,
    MAXIMUM_SELECT_TIMEOUT,
)
from collections.abc import Callable, Mapping
from typing import Any, TypeVarTuple, Unpack

from .._engine.eager import EagerTask

_Ts = TypeVarTuple("_Ts")

PROCESS: contextvars.ContextVar[int] = contextvars.ContextVar("wayline_sim_process", default=0)
"""The simulated process a task belongs to (0: the simulator itself, which never crashes)."""

EPOCH = 1_800_000_000.0
"""The virtual wall clock at the start of every run (a fixed date, so stamps replay)."""


class StuckError(RuntimeError):
    """Nothing is ready and no timer is set: every task waits for something that never comes."""


class _Selector(selectors.BaseSelector):
    """Registers what asyncio asks for (its self-pipe) and never reports an event: nothing in
    a simulation does real I/O. A wait of ``timeout`` seconds moves the clock instead."""

    def __init__(self) -> None:
        self._keys: dict[Any, selectors.SelectorKey] = {}
        self.loop: VirtualLoop | None = None

    def register(self, fileobj: Any, events: int, data: Any = None) -> selectors.SelectorKey:
        key = selectors.SelectorKey(fileobj, _fd(fileobj), events, data)
        self._keys[fileobj] = key
        return key

    def unregister(self, fileobj: Any) -> selectors.SelectorKey:
        return self._keys.pop(fileobj)

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        assert self.loop is not None
        if timeout is None:
            raise StuckError("the simulation is stuck: nothing is ready and no timer is set")
        self.loop.advance(timeout)
        return []

    def get_map(self) -> Mapping[Any, selectors.SelectorKey]:
        return self._keys

    def close(self) -> None:
        self._keys.clear()


def _fd(fileobj: Any) -> int:
    return fileobj if isinstance(fileobj, int) else int(fileobj.fileno())


class VirtualLoop(asyncio.SelectorEventLoop):
    def __init__(self, rng: random.Random, *, shuffle: bool = True) -> None:
        selector = _Selector()
        super().__init__(selector)
        selector.loop = self
        self.rng = rng
        self.shuffle = shuffle
        self._now = 1_000.0
        self._start = self._now
        self.dead: set[int] = set()
        """Crash-stopped processes: their callbacks are parked."""
        self.parked: list[asyncio.Handle] = []
        self._sweep = False
        self.born: dict[asyncio.Task[Any], int] = {}
        """Each task's place in the order the loop made them: the set of tasks asyncio keeps
        iterates in the order of their addresses, which no seed decides."""
        self.eager: list[EagerTask] = []
        """The engine's eager tasks made on this loop (:meth:`adopt`)."""

    def adopt(self, task: EagerTask) -> None:
        """An eager task made on this loop (they take their first step without
        ``create_task``): :meth:`tasks` lists it too."""
        self.eager.append(task)

    def tasks(self) -> list[asyncio.Task[Any]]:
        """Every task made on this loop, done or not: what ``asyncio.all_tasks`` would list
        before its filter, without a walk over every task of the process that the garbage
        collector has not yet freed (thousands, from earlier seeds: 5-15% of a seed's CPU)."""
        return [*self.born, *self.eager]

    def create_task(self, coro: Any, **kwargs: Any) -> asyncio.Task[Any]:
        task = super().create_task(coro, **kwargs)
        self.born.setdefault(task, len(self.born))
        return task

    def in_birth_order(self, tasks: Any) -> list[asyncio.Task[Any]]:
        """``tasks`` in the order the loop made them, then the engine's eager tasks (which
        take their first step as they are made, without ``create_task``) in the order they
        were made, then any other, last."""
        last = len(self.born)

        def order(task: asyncio.Task[Any]) -> tuple[int, int]:
            born = self.born.get(task)
            if born is not None:
                return (0, born)
            return (1, task.birth) if isinstance(task, EagerTask) else (2, last)

        return sorted(tasks, key=order)

    def time(self) -> float:
        return self._now

    # --- scheduling -------------------------------------------------------------------------
    # asyncio's own ``call_soon`` and ``call_at`` (which ``call_later`` calls), without what a
    # simulation never uses (the debug mode's checks and the stack a debug handle keeps), and
    # with the timer heap holding
    # ``(when, timer)`` pairs: the heap compares the times in C instead of calling
    # ``TimerHandle.__lt__`` (half a million calls over 30 seeds). A pair compares as its
    # timer does (by time; two timers of one time are neither less than the other, as
    # ``TimerHandle`` says too), so the heap keeps the same shape and pops the same timer as
    # asyncio's would, and every seed runs the same callbacks in the same order
    # (``tools/sim_hashes.py``).

    def call_soon(
        self,
        callback: Callable[[Unpack[_Ts]], object],
        *args: *_Ts,
        context: contextvars.Context | None = None,
    ) -> asyncio.Handle:
        if self._closed:  # type: ignore[attr-defined]
            raise RuntimeError("Event loop is closed")
        handle = _made(_Soon, callback, args, self, context)
        self._ready.append(handle)  # type: ignore[attr-defined]
        return handle  # type: ignore[no-any-return]

    def call_at(
        self,
        when: float,
        callback: Callable[[Unpack[_Ts]], object],
        *args: *_Ts,
        context: contextvars.Context | None = None,
    ) -> asyncio.TimerHandle:
        if when is None:
            raise TypeError("when cannot be None")
        if self._closed:  # type: ignore[attr-defined]
            raise RuntimeError("Event loop is closed")
        timer = _made(_Timer, callback, args, self, context)
        timer._when = when
        _heappush(self._scheduled, (when, timer))  # type: ignore[attr-defined]
        timer._scheduled = True
        return timer  # type: ignore[no-any-return]

    def advance(self, seconds: float) -> None:
        if seconds > 0:
            self._now += seconds

    def wall(self) -> float:
        """The virtual wall clock (seconds since the epoch), for ``time.time``."""
        return EPOCH + (self._now - self._start)

    def elapsed(self) -> float:
        return self._now - self._start

    def crash(self, process: int) -> None:
        """Stop every task of ``process`` where it stands, for good: its callbacks are parked,
        never run (until :meth:`revive_parked`, once the seed is judged)."""
        self.dead.add(process)
        self._sweep = True

    def revive_parked(self) -> None:
        """Put the parked callbacks back, so that the tasks of crashed processes can at last
        be cancelled and end (a task whose next step was parked would otherwise never run
        again, not even to take its cancellation)."""
        self.dead.clear()
        ready: Any = self._ready  # type: ignore[attr-defined]
        ready.extend(self.parked)
        self.parked.clear()

    def _run_once(self) -> None:
        ready: Any = self._ready  # type: ignore[attr-defined]
        if self.dead:
            dead, parked = self.dead, self.parked
            kept: list[asyncio.Handle] = []
            for handle in ready:
                # Every handle has a context (``asyncio.Handle`` copies one when given none).
                if handle._context.get(PROCESS, 0) in dead:
                    parked.append(handle)
                else:
                    kept.append(handle)
            ready.clear()
            ready.extend(kept)
            # The timers are swept once per crash: a parked process sets no timer after it,
            # and a live one that wakes a dead task does so through the ready queue.
            timers: list[tuple[float, asyncio.TimerHandle]] = self._scheduled  # type: ignore[attr-defined]
            if self._sweep and any(self._of_dead(t) for _, t in timers):
                self.parked.extend(t for _, t in timers if self._of_dead(t))
                timers[:] = [p for p in timers if not self._of_dead(p[1])]
                heapq.heapify(timers)
            self._sweep = False
        if self.shuffle and len(ready) > 1:
            _shuffle(self.rng, ready)
        self._turn(ready)

    def _turn(self, ready: Any) -> None:
        """One turn of ``asyncio.BaseEventLoop._run_once`` (Python 3.11-3.13), without what a
        simulation never needs: the selector's poll (nothing does I/O, so a wait only moves the
        clock, done here), its events, and the debug mode's timing of each callback. The timer
        heap is handled exactly as there (the same purge of cancelled timers, the same
        arithmetic on the clock), so a seed runs the same callbacks in the same order; a third
        of a seed's CPU was the loop's own turns, much of it these steps."""
        this: Any = self  # asyncio's own attributes, which its stubs do not declare
        scheduled: Any = this._scheduled
        count = len(scheduled)
        if (
            count > _MIN_SCHEDULED_TIMER_HANDLES
            and this._timer_cancelled_count / count > _MIN_CANCELLED_TIMER_HANDLES_FRACTION
        ):
            kept = []
            for pair in scheduled:
                if pair[1]._cancelled:
                    pair[1]._scheduled = False
                else:
                    kept.append(pair)
            heapq.heapify(kept)
            this._scheduled = scheduled = kept
            this._timer_cancelled_count = 0
        else:
            while scheduled and scheduled[0][1]._cancelled:
                this._timer_cancelled_count -= 1
                timer = heapq.heappop(scheduled)[1]
                timer._scheduled = False
        if not (ready or this._stopping):
            if not scheduled:
                raise StuckError("the simulation is stuck: nothing is ready and no timer is set")
            # As the selector's wait of the timeout asyncio computes, to the last bit.
            self.advance(min(max(0, scheduled[0][0] - self._now), MAXIMUM_SELECT_TIMEOUT))
        end_time = self._now + this._clock_resolution
        while scheduled:
            if scheduled[0][0] >= end_time:
                break
            timer = heapq.heappop(scheduled)[1]
            timer._scheduled = False
            ready.append(timer)
        # Every callback ready now, not those they make ready (the next turn's), as asyncio.
        # ``Handle._run`` inlined (one Python call fewer a callback); what a callback raises
        # goes to the exception handler as there.
        for _ in range(len(ready)):
            handle = ready.popleft()
            if not handle._cancelled:
                try:
                    handle._context.run(handle._callback, *handle._args)
                except (SystemExit, KeyboardInterrupt):
                    raise
                except BaseException as exc:
                    source = format_helpers._format_callback_source(handle._callback, handle._args)
                    self.call_exception_handler(
                        {
                            "message": f"Exception in callback {source}",
                            "exception": exc,
                            "handle": handle,
                        }
                    )

    def _of_dead(self, handle: asyncio.Handle) -> bool:
        context: contextvars.Context | None = getattr(handle, "_context", None)
        return context is not None and context.get(PROCESS, 0) in self.dead


class _Soon(asyncio.Handle):
    """``asyncio.Handle`` made by :func:`_made`."""

    __slots__ = ()


class _Timer(asyncio.TimerHandle):
    """``asyncio.TimerHandle`` made by :func:`_made`."""

    __slots__ = ()


def _shuffle(rng: random.Random, ready: Any) -> None:
    """``rng.shuffle(ready)`` with the same draws and the same result, in place, without its
    call of ``_randbelow`` for each element (``random.Random.shuffle`` and
    ``_randbelow_with_getrandbits`` of Python 3.11-3.13, inlined; the ready queue is shuffled
    every turn). A subclass of ``random.Random`` may draw otherwise, so it shuffles itself."""
    if type(rng) is not random.Random:
        rng.shuffle(ready)
        return
    getrandbits = rng.getrandbits
    items = list(ready)  # indexing a long deque walks it
    for i in range(len(items) - 1, 0, -1):
        bound = i + 1
        k = bound.bit_length()
        j = getrandbits(k)
        while j >= bound:
            j = getrandbits(k)
        items[i], items[j] = items[j], items[i]
    ready.clear()
    ready.extend(items)


def _made(kind: type[asyncio.Handle], callback: Any, args: Any, loop: Any, context: Any) -> Any:
    """A handle of ``kind`` with what ``asyncio.Handle.__init__`` sets, made without calling
    it (nor asking the loop for its debug mode, never on here, nor keeping a debug stack): one
    Python call a handle instead of two, and a seed makes tens of thousands."""
    handle: Any = _new(kind)
    handle._context = _copy_context() if context is None else context
    handle._loop = loop
    handle._callback = callback
    handle._args = args
    handle._cancelled = False
    handle._repr = None
    handle._source_traceback = None
    return handle


_new = object.__new__
_copy_context = contextvars.copy_context
_heappush = heapq.heappush
