"""Notes of the messages handed back with a delay, so they are not counted in flight.

JetStream keeps a message nak'ed with a delay in its consumer's ``num_ack_pending`` until it
is delivered again, and says nowhere (consumer info, stream info) which of those messages are
waiting out a delay. Yet such a message is held by no worker: counting it in flight would keep
a version's replicas up, idle, for a whole retry backoff (``in_flight_messages``). So the
queue notes each delayed hand-back under ``d.<consumer>.<stream seq>.<due ms>`` in the
idempotency bucket, and the in-flight count leaves out the notes still in the future.

The due time is in the key, so counting reads one stream info (its subject counts) and no
values. A note is written after the server confirmed the nak: a redelivery cannot come before
its note except for a delay shorter than the note's own trip, and that note is then already
past due, so it counts for nothing. A redelivery drops the notes of its message; a note past
due counts for nothing and is purged by the next count, so a note that outlives its message
(a message deleted by retention, a purge that failed) costs nothing for long."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from .codec import wrap

log = logging.getLogger("wayline.worlds.nats")


class DelayNotes:
    def __init__(
        self,
        js: Any,
        bucket: str,
        *,
        url: str,
        timeout: float,
        now: Callable[[], float],
        part: int = 0,
    ) -> None:
        self._js = js
        self._stream = f"KV_{bucket}"
        # a partition's consumers have the names of every other partition's, and its stream
        # sequences coincide with theirs: its notes live under ``d<part>.`` (``d.``: the first)
        self._prefix = f"$KV.{bucket}.d{part or ''}."
        self._url = url
        self._timeout = timeout
        self._now = now
        """The server's clock as this process knows it: a nak's delay runs on the server."""

    async def note(self, consumer: str, seq: int, delay_seconds: float) -> None:
        """Note that message ``seq`` of ``consumer`` waits out ``delay_seconds`` from now. A
        note that cannot be written is logged: the message then counts in flight until it is
        due, as it did before notes (never the other way, a held message left out)."""
        due_ms = int((self._now() + delay_seconds) * 1000)
        try:
            await self._js.publish(
                f"{self._prefix}{consumer}.{seq}.{due_ms}", b"", timeout=self._timeout
            )
        except Exception as err:
            log.warning("could not note the delay of message %s: %s", seq, err)

    async def drop(self, consumer: str, seq: int) -> None:
        """Drop the notes of message ``seq`` (delivered again: its delay is over)."""
        try:
            await self._js.purge_stream(self._stream, subject=f"{self._prefix}{consumer}.{seq}.*")
        except Exception as err:  # a note left behind is past due: it counts for nothing
            log.debug("could not drop the delay notes of message %s: %s", seq, err)

    async def ahead(self, consumers: set[str]) -> dict[str, list[int]]:
        """The due times (epoch milliseconds) of the notes still ahead of each of
        ``consumers`` that has any; their notes past due are purged. One stream info of every
        note answers for all of them: a topic has up to 91 consumers, and a question each cost
        most of a count, while the notes are few (one a message waiting out a delay)."""
        now_ms = self._now() * 1000
        ahead: dict[str, list[int]] = {}
        for subject, consumer, _, due in await self._notes():
            if consumer not in consumers:
                continue
            if due > now_ms:
                ahead.setdefault(consumer, []).append(due)
            else:
                try:
                    await self._js.purge_stream(self._stream, subject=subject)
                except Exception as err:
                    log.debug("could not purge the delay note %s: %s", subject, err)
        return ahead

    async def waiting(self) -> set[tuple[str, int]]:
        """The (consumer, stream sequence) of each message whose delay note is still ahead:
        handed back to wait out a delay, held by no worker."""
        now_ms = self._now() * 1000
        return {(consumer, seq) for _, consumer, seq, due in await self._notes() if due > now_ms}

    async def _notes(self) -> list[tuple[str, str, int, int]]:
        """Each note: its subject, consumer, stream sequence and due time (epoch ms; 0 for a
        note that does not parse, which is past due)."""
        try:
            info = await self._js.stream_info(self._stream, subjects_filter=f"{self._prefix}>")
        except Exception as err:
            raise wrap(self._url, "counting the delayed messages", err) from err
        out = []
        for subject in info.state.subjects or {}:
            consumer, _, rest = subject.removeprefix(self._prefix).partition(".")
            seq, _, due = rest.rpartition(".")
            out.append(
                (
                    subject,
                    consumer,
                    int(seq) if seq.isdigit() else 0,
                    int(due) if due.isdigit() else 0,
                )
            )
        return out
