"""Moving queued work to the subject a release before the priority levels reads, for a rollback.

A release before the levels reads only ``<prefix>.q.t.<topic>.*``; work of another priority and
work with a fairness key live on ``q.p<level>`` and ``q.p<level>f<lane>`` (``names.kind_of``),
which it never reads, so rolling back to it would strand that work (and a keyed message there
would hold its idempotency key for ever). ``drain`` copies each such message onto ``q.t`` under
the same last subject token (its idempotency key's, or its own id) with its payload unchanged,
then removes the original. Copy before remove: a drain cut off between the two leaves a message
twice (one wake more, which every wake tolerates), never none; the copy's ``Nats-Msg-Id`` is
derived from the original's sequence (``copy_id``), so a drain run again within the stream's
duplicate window does not copy it a second time.

A message delivered and not acked may be held by a worker: moving it would hand it to a second
worker beside the first. Such messages are left and counted, unless ``held_too`` (the workers
that could hold them are stopped). Whether a message was delivered is asked of its consumer
right before it is moved, not only once at the start: a worker that takes it while the drain
runs holds it alone. The question and the move are still two steps: a worker that takes the
message in the few milliseconds between them holds it beside its copy (one wake more).
Schedules that will fire onto a level or a lane are counted, not moved: once fired, a drain
moves them.
"""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator, Awaitable, Callable
from collections.abc import Set as AbstractSet
from typing import Any

from ...world.ports import LaneDrain
from .direct import StoredMsg, publish_retried
from .names import Names, consumer_name, kind_level, token_value

_KEEP_HEADERS = ("Wayline-Id",)
"""Headers the copy keeps: a fired schedule's id (``queue._message_id`` honours it on ``q.t``
because the subject's last token is unchanged)."""


def copy_id(names: Names, seq: int) -> str:
    """The ``Nats-Msg-Id`` of the copy of message ``seq``: the same for a drain run again (so
    the stream's duplicate window refuses a second copy), and, as every id an enqueue chooses,
    32 hex digits: a message under an idempotency key without such an id is taken for someone
    else's bytes and removed (``queue._queued``)."""
    return hashlib.sha256(f"lane-drain/{names.queue_stream}/{seq}".encode()).hexdigest()[:32]


def _held(msg: StoredMsg, kind: str, token: str, delivered: dict[tuple[str, str], int]) -> bool:
    """Whether the consumer of the message's subject delivered it (a work queue keeps a
    message until its ack, so a delivered message still stored is not acked yet)."""
    return msg.seq <= delivered.get((kind, token), 0)


def consumer_of(kind: str, token: str) -> str | None:
    """The name of the consumer of ``kind`` (a level or lane, not ``t``) of the topic whose
    subject token is ``token``, or None for a token no enqueue makes."""
    topic = token_value(token)
    if topic is not None:
        return consumer_name(topic, kind)
    if token.startswith("=h") and len(token) >= 42:  # a hashed topic: its hash names it too
        return f"qph{kind[1:]}_{token[2:42]}"
    return None


async def delivered_now(js: Any, names: Names, kind: str, token: str) -> int:
    """The last stream sequence the consumer of ``kind`` of the topic ``token`` delivered,
    asked now (0: it has none, or does not exist)."""
    import nats.js.errors

    name = consumer_of(kind, token)
    if name is None:
        return 0
    try:
        info = await js.consumer_info(names.queue_stream, name)
    except nats.js.errors.NotFoundError:
        return 0
    return int(info.delivered.stream_seq or 0)


async def delivered_seqs(js: Any, names: Names) -> dict[tuple[str, str], int]:
    """For each consumer of the queue stream, keyed by the (kind, topic token) its filter
    names, the last stream sequence it delivered."""
    out: dict[tuple[str, str], int] = {}
    offset = 0
    while True:
        # The server answers 256 consumers a page: a consumer missed would have its held
        # messages taken for never delivered, and moved from under their holder.
        page = await js.consumers_info(names.queue_stream, offset=offset)
        for info in page:
            parts = str(info.config.filter_subject or "").split(".")
            # A partition's consumers filter on its own root (``q<i>`` in partition i > 0).
            root = ".".join(parts[:2])
            if len(parts) == 5 and root == names.queue_root and parts[4] == ">":
                out[(parts[2], parts[3])] = int(info.delivered.stream_seq or 0)
        if not page:
            return out
        offset += len(page)


async def drain(
    stored: Callable[[], AsyncIterator[tuple[StoredMsg, dict[str, Any]]]],
    remove: Callable[[int], Awaitable[None]],
    nc: Any,
    js: Any,
    names: Names,
    *,
    timeout: float,
    url: str,
    held_too: bool,
    waiting: AbstractSet[tuple[str, int]] = frozenset(),
) -> LaneDrain:
    """Move the queue's work off its level and lane subjects (the module docstring):
    ``stored`` lists the queue stream's messages, ``remove`` deletes one by its sequence,
    ``waiting`` names the (consumer, sequence) of the messages handed back with a delay still
    ahead (``DelayNotes.waiting``): they are counted as delayed and left, even ``held_too``,
    since a copy would be served at once, its retry's delay lost."""
    delivered = await delivered_seqs(js, names)
    moved = held = delayed = 0
    async for msg, _ in stored():
        parts = msg.subject.split(".")
        if len(parts) != 5:
            continue
        kind, token, last = parts[2], parts[3], parts[4]
        if kind == "s":
            target = str(msg.headers.get("Nats-Schedule-Target", "")).split(".")
            delayed += len(target) == 5 and target[2] != "t"
            continue
        try:
            kind_level(kind)
        except ValueError:  # not a subject of ready work
            continue
        if kind == "t":
            continue
        if (consumer_of(kind, token), msg.seq) in waiting:
            delayed += 1
            continue
        if not held_too and (
            _held(msg, kind, token, delivered)
            # asked again now: a worker may have taken it since the listing at the start
            or msg.seq <= await delivered_now(js, names, kind, token)
        ):
            held += 1
            continue
        headers = {k: v for k, v in msg.headers.items() if k in _KEEP_HEADERS}
        headers["Nats-Msg-Id"] = copy_id(names, msg.seq)
        await publish_retried(
            nc,
            f"{names.queue_root}.t.{token}.{last}",  # in the partition it was in
            msg.data,
            headers,
            timeout=timeout,
            url=url,
            doing=f"moving message {msg.seq} off {msg.subject}",
        )
        await remove(msg.seq)
        moved += 1
    return LaneDrain(moved=moved, held=held, delayed=delayed)
