"""Durable streams from steps (the reference runtime's ``getWritable``, DBOS streams).

    @wayline.step
    async def transcode(video: str) -> str:
        progress = wayline.stream("progress")
        for pct in range(0, 101, 10):
            await progress.write({"pct": pct})
        return "done"

    async for chunk in client.stream(run_id, "progress", start=0):
        print(chunk.index, chunk.data)

Records are stored in the world (a subject per run and stream on NATS, a table on SQLite), in
write order, and read from any index, so a reader resumes where it stopped. A stream is closed
when the step that wrote it completes or fails for good: a ``close`` record ends every reader
once the step's outcome is recorded.

An attempt that crashes, or raises to be retried, leaves what it wrote. The next attempt's first
write is preceded by a ``restart`` record naming the attempt it replaces; a reader that sees
one knows the records before it from that step were the partial output of an attempt that did
not finish (each data record also carries its ``attempt``). Nothing is ever removed from a
stream before cleanup removes the run.

The close is written before the step's outcome is recorded (``_engine.step_runner``), so an
attempt can die between the two. Its step then runs again, and the stream's last record is its
own close: the next attempt writes a ``restart`` after it and goes on, and a reader reads on past
that close into the restart. A writer finds a close final when another step wrote it or when
its step's outcome is recorded; a reader finds it final when the outcome recorded is that of the
attempt that wrote it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Protocol

from .._core.events import Event
from .._core.projections import RunInfo, fold
from .._core.serde import encode
from ..errors import FatalError, NotInStepError, WaylineError, WorldError
from .context import step_context

log = logging.getLogger("wayline.runtime")


class StreamStore(Protocol):
    """Where step streams are kept: what a world offers (``World.write_stream``/``read_stream``;
    the world sits above the sdk, so the sdk names only this shape)."""

    async def write_stream(
        self, run_id: str, stream: str, records: Sequence[Mapping[str, Any]]
    ) -> None: ...

    async def read_stream(
        self, run_id: str, stream: str, start: int = 0, limit: int = 1000
    ) -> list[dict[str, Any]]: ...

    async def list_events(self, run_id: str, after_seq: int = 0) -> list[Event]: ...


class StreamSource(StreamStore, Protocol):
    """A store that also tells whether the run has ended (a reader stops there)."""

    async def get_run(self, run_id: str) -> RunInfo | None: ...


class StreamClosedError(FatalError, WaylineError):
    """A write to a stream whose step already completed (or failed for good), from another
    step or after that outcome was recorded. Fatal: a retry would find it closed again."""

    code = "STREAM_CLOSED"

    def __init__(self, message: str) -> None:
        WaylineError.__init__(self, message)


@dataclass(frozen=True, slots=True)
class StreamChunk:
    index: int
    """Position in the stream (0-based): pass ``start=index + 1`` to resume after it."""
    kind: str
    """``data``, or ``restart`` (the records before it from ``step_id`` were partial)."""
    data: Any
    step_id: str
    attempt: int


@dataclass(slots=True)
class _AttemptStreams:
    world: StreamStore
    run_id: str
    step_id: str
    attempt: int
    loop: asyncio.AbstractEventLoop
    writers: dict[str, StreamWriter] = field(default_factory=dict)


_current: ContextVar[_AttemptStreams | None] = ContextVar("wayline_streams", default=None)


class StreamWriter:
    """Writes one stream of the running step attempt."""

    def __init__(self, owner: _AttemptStreams, name: str) -> None:
        self._owner = owner
        self.name = name
        self._checked = False
        self._closed = False

    async def write(self, chunk: Any) -> None:
        """Store ``chunk`` (any JSON-able value) durably before returning."""
        o = self._owner
        if self._closed:
            raise StreamClosedError(f"stream {self.name!r} of run {o.run_id} is closed")
        data = encode(chunk, what=f"chunk for stream {self.name!r}")
        records: list[dict[str, Any]] = []
        if not self._checked:
            records += await self._first_write()
        records.append({"kind": "data", "data": data, "step": o.step_id, "attempt": o.attempt})
        await o.world.write_stream(o.run_id, self.name, records)

    def write_sync(self, chunk: Any) -> None:
        """``write`` from a plain ``def`` step (it runs in a thread)."""
        asyncio.run_coroutine_threadsafe(self.write(chunk), self._owner.loop).result()

    async def _first_write(self) -> list[dict[str, Any]]:
        o = self._owner
        stored = await o.world.read_stream(o.run_id, self.name, 0, 1_000_000)
        existing = [r for r in stored if _written_by_a_step(r)]
        last = existing[-1] if existing else None
        mine = [r for r in existing if r.get("step") == o.step_id]
        earlier = sorted({int(r.get("attempt") or 0) for r in mine} - {o.attempt})
        if last is not None and last.get("kind") == "close":
            by = last.get("step")
            if by != o.step_id or await _settled_by(o.world, o.run_id, o.step_id) is not None:
                self._checked = self._closed = True
                raise StreamClosedError(
                    f"stream {self.name!r} of run {o.run_id} was closed by step {by}"
                )
            # This step closed the stream and its outcome is not recorded: the attempt that
            # wrote the close died before the step's completion was written, and this attempt
            # runs because that outcome is unknown. Its start was recorded after the dead
            # one's, so its number is higher and ``earlier`` holds the dead attempt: it writes
            # on after a restart record, as any re-run does.
        self._checked = True
        if earlier:
            marker = {"kind": "restart", "step": o.step_id, "attempt": o.attempt}
            return [{**marker, "abandoned": earlier[-1]}]
        return []

    async def close(self, outcome: str = "completed") -> None:
        if self._closed:
            return
        self._closed = True
        o = self._owner
        record = {"kind": "close", "step": o.step_id, "attempt": o.attempt, "outcome": outcome}
        await o.world.write_stream(o.run_id, self.name, [record])


def stream(name: str) -> StreamWriter:
    """Inside a step: the writer of this run's stream ``name`` (the same object for every call
    in one attempt). Raises :class:`wayline.NotInStepError` elsewhere."""
    owner = _current.get()
    if owner is None:
        step_context()  # raises NotInStepError with the usual message
        raise NotInStepError("wayline.stream() can only be called inside a step body")
    if not isinstance(name, str) or not name:
        raise ValueError(f"a stream name must be a non-empty string, not {name!r}")
    writer = owner.writers.get(name)
    if writer is None:
        writer = owner.writers[name] = StreamWriter(owner, name)
    return writer


@contextmanager
def attempt_streams(
    world: StreamStore | None,
    run_id: str,
    step_id: str,
    attempt: int,
    loop: asyncio.AbstractEventLoop | None = None,
) -> Iterator[_AttemptStreams | None]:
    """Make ``wayline.stream`` available to one step attempt's body. ``loop``: the running
    loop, if the caller holds it (None asks for it)."""
    if world is None:
        yield None
        return
    owner = _AttemptStreams(world, run_id, step_id, attempt, loop or asyncio.get_running_loop())
    token = _current.set(owner)
    try:
        yield owner
    finally:
        _current.reset(token)


async def close_streams(owner: _AttemptStreams | None, outcome: str) -> None:
    """The step completed or failed for good: close what it wrote. A failure to write the
    close is logged, never raised: the step's outcome matters more (readers also stop at the
    run's end)."""
    if owner is None:
        return
    for writer in owner.writers.values():
        try:
            await writer.close(outcome)
        except (WorldError, NotImplementedError) as err:
            log.warning("closing stream %r of run %s failed: %s", writer.name, owner.run_id, err)


async def follow_stream(
    world: StreamSource,
    run_id: str,
    name: str,
    start: int = 0,
    *,
    follow: bool = True,
    poll: float = 0.05,
) -> AsyncIterator[StreamChunk]:
    """The chunks of a run's stream from ``start``, in order, until its ``close`` record (or,
    with ``follow=False``, until what is stored now is read). A close is final once its step's
    outcome is recorded; until then the attempt that wrote it may have died, and a follower
    waits at it for the step's next attempt, whose ``restart`` record comes next. A run that
    ends without its stream being closed (its step never settled) also ends the iteration."""
    index = max(0, start)
    task = asyncio.current_task()
    handled = 0 if task is None else task.cancelling()  # caught by the caller before it read
    close: Mapping[str, Any] | None = None  # the close read last, if nothing came after it
    while True:
        records = await world.read_stream(run_id, name, index, 500)
        for record in records:
            if not _written_by_a_step(record):
                index += 1  # someone else's bytes: no chunk (the indexes stay the world's)
                continue
            kind = str(record.get("kind"))
            if close is not None and not await _reopens(world, run_id, close, record):
                return  # not a new attempt of the closing step: the close stands
            close = record if kind == "close" else None
            if close is not None:
                index += 1
                continue
            yield StreamChunk(
                index,
                kind,
                record.get("data"),
                str(record.get("step")),
                int(record.get("attempt") or 0),
            )
            index += 1
        if records:
            continue
        if not follow:
            return
        info = await world.get_run(run_id)
        if info is None or info.status.terminal:
            if not await world.read_stream(run_id, name, index, 1):
                return  # nothing was written after the end (or the run is gone)
            continue
        if close is not None and await _settled_by(world, run_id, close["step"]) is not None:
            return  # its step has its outcome: no attempt comes after this close
        # a cancel that a read swallowed (one that lands as the read completes is lost:
        # ``asyncio.wait_for`` before Python 3.12, in the NATS client) still ends the reader;
        # the task that began the read counts it (as ``_core.cancels.stop_if_cancelled`` reads
        # the current task's count)
        if task is not None and task.cancelling() > handled:
            raise asyncio.CancelledError
        await asyncio.sleep(poll)


async def _settled_by(world: StreamStore, run_id: str, step_id: str) -> int | None:
    """The attempt whose outcome (completed, or failed for good) the run's log holds for the
    step: None while it has none, 0 when no body's outcome settled it (a step failed for running
    out of attempts, say)."""
    step = fold(run_id, await world.list_events(run_id)).steps.get(step_id)
    if step is None or not step.terminal:
        return None
    ended = [a.number for a in step.attempts if a.outcome in ("completed", "failed")]
    return ended[-1] if ended else 0


async def _reopens(
    world: StreamStore, run_id: str, close: Mapping[str, Any], record: Mapping[str, Any]
) -> bool:
    """Whether ``record``, the next after ``close``, is a later attempt of the closing step:
    that step's restart, written after an attempt that closed the stream died before its
    outcome was recorded. Not when the closing attempt's own outcome is in the log (anyone
    can write to a NATS stream: a restart written after a final close is not the step's)."""
    if record.get("kind") != "restart" or record.get("step") != close["step"]:
        return False
    return await _settled_by(world, run_id, close["step"]) != int(close["attempt"])


def _written_by_a_step(record: Mapping[str, Any]) -> bool:
    """A record as a step writes it (anyone who can write to the world can write others: a
    NATS step stream takes anyone's bytes): a known kind, its step's id and attempt."""
    attempt = record.get("attempt")
    return (
        record.get("kind") in ("data", "restart", "close")
        and isinstance(record.get("step"), str)
        and isinstance(attempt, int)
        and not isinstance(attempt, bool)
    )
