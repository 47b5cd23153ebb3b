"""Appends of concurrent runs gathered into JetStream atomic batches.

Under ``sync_interval: always`` (the chart's default) nats-server fsyncs before it acknowledges
each stored message, and 100 runs appending at once cost 100 fsyncs. An atomic batch (stream
``allow_atomic``, nats-server >= 2.12) is stored with a handful of fsyncs whatever its size:
measured on nats-server 2.15.1 with strace, 100 single publishes made 100 fsyncs and one batch
of 100 messages made 4 (bench/RESULTS.md, "NATS appends gathered"). Each message of a batch
keeps its own ``Nats-Expected-Last-Subject-Sequence`` and ``Nats-Msg-Id``; the server stores
all or none, with consecutive stream sequences in the batch's order, and refuses the whole
batch with one error (10071 for any stale expectation, 10201 for a known message id) without
naming the message.

So appends are gathered as the connection's publishes are (``wire.py``): on a quiet log the
first append of a turn of the event loop is published at once, on its own; the others made
in that turn wait for its end and go as one batch. While the log is busy (its last turn made
several appends) every append of a turn goes into the turn's batch. A refused or unanswered
batch is published again append by append (each with its own headers, as before), so every
run gets its own answer: a stale expectation fails exactly that run's append, a message the
batch may have stored is found by its ``Nats-Msg-Id``.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import Any

from ..._core import clock
from .direct import Acked, publish_batch, publish_retried

log = logging.getLogger("wayline.worlds.nats")

MAX_BATCH = 256
"""Appends in one atomic batch (the server's own limit, ``max_batch_size``, is 1,000
messages); more in a turn go as several batches."""
MIN_BATCH = 16
"""Fewer appends in a turn are published one by one. nats-server stages an atomic batch of a
file stream in a store of its own on disk (3 to 4 directories made, 3 renames and 3 to 4
fsyncs per batch whatever its size, counted with strace on 2.15.1), and takes the batches of a
stream one at a time: under ``sync_interval: always`` 100 messages as concurrent batches of 10
took as long as 100 single publishes, and as batches of 50 a quarter of that or less
(``bench/atomic_batches.py``)."""
ATOMIC_DISABLED = 10174
"""The server's code for a batch sent to a stream without ``allow_atomic``."""


@dataclass(slots=True, eq=False)
class _Entry:
    subject: str
    body: bytes
    headers: dict[str, str]
    turn: asyncio.Future[list[_Entry]]
    """Resolved at the end of the turn with the batch the entry is in."""
    result: asyncio.Future[Acked | None]
    """The entry's stored message; None: publish it on its own."""
    unsure: bool = field(default=False)
    """The batch may have been stored although it was not acknowledged."""


class Gather:
    """Publishes the event log's appends, gathering concurrent ones into atomic batches."""

    def __init__(self, nc: Any, *, timeout: float, url: str, min_batch: int = 1) -> None:
        self._nc = nc
        self._timeout = timeout
        self._url = url
        self.enabled = min_batch > 0
        """False: every append is published on its own (``gather_appends=0``, or a stream
        that refuses atomic batches)."""
        self.min_batch = MIN_BATCH if min_batch == 1 else max(2, min_batch)
        """The fewest appends of a turn that go as one batch (``MIN_BATCH`` unless told)."""
        self._pending: list[_Entry] = []
        self._turn = 0
        self._busy = False
        self.batches = 0
        """Atomic batches stored (for the benchmark and the tests)."""
        self.refused = 0
        """Batches refused or unanswered, published again append by append."""

    async def publish(
        self, subject: str, body: bytes, headers: dict[str, str], *, doing: str
    ) -> Acked | None:
        """What :func:`direct.publish_retried` answers for this one message."""
        unsure = False
        if self.enabled:
            loop = asyncio.get_running_loop()
            if self._turn == 0:
                loop.call_soon(self._end_of_turn)
            self._turn += 1
            if self._turn > 1 or self._busy:
                entry = _Entry(subject, body, headers, loop.create_future(), loop.create_future())
                self._pending.append(entry)
                acked = await self._gathered(entry)
                if acked is not None:
                    return acked
                unsure = entry.unsure
        acked = await publish_retried(
            self._nc, subject, body, headers, timeout=self._timeout, url=self._url, doing=doing
        )
        if unsure and acked is not None:
            # the batch may have stored it first: no sample of the server's clock
            acked = acked._replace(first=False)
        return acked

    def _end_of_turn(self) -> None:
        self._busy = self._turn > self.min_batch  # enough for a batch: the next gathers all
        self._turn = 0
        pending = [e for e in self._pending if not e.turn.done()]  # (a cancelled caller)
        self._pending = []
        if len(pending) < self.min_batch:
            for entry in pending:
                entry.turn.set_result([entry])
            return
        for start in range(0, len(pending), MAX_BATCH):
            batch = pending[start : start + MAX_BATCH]
            for entry in batch:
                entry.turn.set_result(batch)

    async def _gathered(self, entry: _Entry) -> Acked | None:
        try:
            batch = await entry.turn
        except asyncio.CancelledError:
            if entry.turn.done() and not entry.turn.cancelled():
                batch = entry.turn.result()
                if batch[0] is entry:  # cancelled before sending: the others go on their own
                    _release(batch, unsure=False)
            raise
        if len(batch) == 1:
            return None
        if batch[0] is entry:
            await self._send(batch)
        return await entry.result

    async def _send(self, batch: list[_Entry]) -> None:
        import nats.js.errors

        unsure = True
        try:
            if not self._nc.is_connected:  # each waits for the connection on its own
                unsure = False
                return
            messages = [(e.subject, e.body, e.headers) for e in batch]
            sent = clock.now()
            last = await publish_batch(self._nc, messages, self._timeout)
            acked = clock.now()
        except nats.js.errors.APIError as err:  # the server's answer: nothing was stored
            unsure = False
            self.refused += 1
            if err.err_code == ATOMIC_DISABLED:
                log.warning(
                    "NATS at %s: the event log's stream refuses atomic batches (allow_atomic "
                    "is off): appends are published one by one",
                    self._url,
                )
                self.enabled = False
        except Exception:  # no answer, the connection lost: publishing each again says
            self.refused += 1
        else:
            self.batches += 1
            first = last - len(batch) + 1
            for i, entry in enumerate(batch):
                if not entry.result.done():
                    entry.result.set_result(Acked(first + i, False, sent, acked, True))
        finally:
            _release(batch, unsure=unsure)


def _release(batch: list[_Entry], *, unsure: bool) -> None:
    """Every entry of the batch not answered yet is published on its own."""
    for entry in batch:
        if not entry.result.done():
            entry.unsure = unsure
            entry.result.set_result(None)
