"""The queue on JetStream.

One work-queue stream. A message lives on its own subject ``<prefix>.q.t.<topic>.<mid>``
(``mid`` = a fresh uuid) when it has the default priority, as every message did before the
priority levels, and on ``<prefix>.q.p<level>.<topic>.<mid>`` when it has another
(``levels.py``); a delayed one is first a message schedule on
``<prefix>.q.s.<topic>.<mid>`` (``Nats-Schedule: @at …``) whose target is that subject. Each
topic has one durable pull consumer filtered on ``<prefix>.q.t.<topic>.>`` only, so it never
sees (and, acking, never cancels) a pending schedule. ``message_id`` is the stream sequence
(stable across redeliveries); a delayed message's id is its ``Wayline-Id`` header, which the
scheduler copies onto the message it fires. ``attempt`` is the consumer's ``num_delivered``.

A message enqueued under an idempotency key lives on the key's own subject token
(``key_token``: a hash of the key) instead of a uuid, and is published with
``Nats-Expected-Last-Subject-Sequence: 0`` checked over every topic's subjects of that token
(``Nats-Expected-Last-Subject-Sequence-Subject: <prefix>.q.*.*.<token>``, schedules included).
So one publish is the whole claim: the server stores it only while no message or schedule
under the key is stored, which is exactly while the key's message is queued, delayed or in
flight; a refused publish (10071) reads the stored message's id and answers it. Acking (or
dead-lettering, or retention deleting) the message removes it and so frees the key: nothing
to release, nothing to go stale, nothing a crashed writer can leave half done. A publish
retried after a lost ack carries the same ``Nats-Msg-Id`` and is refused as held by the very
message it stored. All of it is stored on the server, so it survives restarts.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ..._core import ordering
from ..._core.ids import MessageId
from ...errors import WorldError, WorldUnavailableError
from ...telemetry import carry
from ...waits import wait_set
from ...world import Delivery, QueueDepth, entries
from ...world.ports import LaneDrain
from ...world.routing import plain_topic
from . import lane_drain, wire
from .buckets import kv_bucket
from .codec import decode_payload, dumps, parse_stamp, rfc3339, wrap
from .delay_notes import DelayNotes
from .direct import (
    StoredMsg,
    TooManyResults,
    connected,
    delete_acked,
    direct_batch,
    last_seq,
    publish_retried,
)
from .lane_choice import LaneChoice
from .levels import LANE_SCAN_EVERY, RESCAN_SECONDS, Channel, Levels, StreamProbe
from .names import (
    ALL_KINDS,
    PLAIN_KINDS,
    Names,
    consumer_name,
    key_token,
    kind_lane,
    kind_level,
    kind_of,
    token_value,
)

log = logging.getLogger("wayline.worlds.nats")

_ID_HEADER = "Wayline-Id"
_SCHEDULES_KNOWN = 4096
"""Schedules this process published whose stream sequence it remembers for a cancel
(``cancel_delayed``), the oldest forgotten first: a forgotten one is only not cancelled."""
_MAX_ACK_PENDING = 20_000
_POLL_SECONDS = 0.25
"""How long a receive that waits on several levels at once waits before it asks again, unless
a publish on its topic comes first: the latency of a redelivery then."""
_ONE_PULL_SECONDS = 0.5
"""The longest one long pull on a receive's only recorded level lasts before the receive looks
again: a publish heard meanwhile on another level (urgent work) does not end the pull, so
with the worker's longer receives (``worker._poll_seconds``: 1.5 s with one flow slot and
three flow topics) such a message waited for the rest of the pull, where the worker's 0.5 s
receives had it wait at most that long."""
_CHANNELS: tuple[Channel, ...] = ALL_KINDS
"""The subjects a topic's ready messages live on (``names.kind_of``): the one a release before
the levels used for every level, which holds the default priority's work without a fairness
key; one per other priority for work without a key (``p5`` is still read: a release between
the two sent the default priority there); and the fair lanes of each level for work with one."""
_LISTED_AT_MOST = 10_000
"""Up to how many stored messages a count lists every subject of a topic in one answer (about
60 bytes a message) rather than asking each subject without a consumer on its own."""
_CONSUMER_EXISTS = 10148  # JSConsumerExistsErr: "consumer already exists" (action create)


@dataclass(slots=True)
class _Held:
    """A delivery's handle: the message, and until when (monotonic) this process holds it."""

    msg: Any
    fresh_until: float
    settled: bool = False
    handbacks: int = 0
    """Graceful hand-backs of this message before this delivery (not counted as attempts)."""
    held_handbacks: int = 0
    """Of those, the hand-backs over a pause in a row just before it (``Delivery``'s)."""
    held_note: bool = False
    """A ``g<seq>`` note was found for it (counted or not): the ack drops it."""
    epoch: int = 0
    """The connection it was received on (``Queue.lost_connection`` ends that epoch)."""


@dataclass(slots=True)
class _Inbox:
    """A consumer's one reply subscription (``<prefix>.*``; pull ``n`` replies to
    ``<prefix>.n``), restored with the connection like any subscription. Deliveries carry
    the stream's subject, so they go to the pull in progress (one at a time per consumer)."""

    prefix: str
    sub: Any = None
    count: int = 0
    active: Callable[[Any], None] | None = None
    cut: Callable[[], None] | None = None
    """Ends the pull in progress at once: the connection it was asked on is lost."""

    def on_msg(self, msg: Any) -> None:
        if self.active is not None:
            self.active(msg)
        # else: a delivery of no pull in progress (its pull timed out and this inbox was
        # dropped): left to be redelivered after ack_wait, never held from a guessed time


async def _unsubscribe(sub: Any) -> None:
    try:
        await sub.unsubscribe()
    except Exception as err:  # the connection is going anyway
        log.debug("dropping a pull inbox failed: %r", err)


class Queue:
    def __init__(
        self,
        nc: Any,
        js: Any,
        names: Names,
        *,
        url: str,
        timeout: float,
        visibility: float,
        replicas: int,
        memory: bool,
        now: Callable[[], float],
        aging_seconds: float = ordering.AGING_SECONDS,
    ) -> None:
        self._now = now
        """The server's clock as this process knows it (``skew.py``): an ``@at`` schedule
        fires by the server's clock, so a delay is counted from it."""
        self._nc = nc
        self._js = js
        self._names = names
        self._url = url
        self._timeout = timeout
        self._visibility = visibility
        # a settlement sent this long before the hold ends may arrive after it
        self._margin = min(5.0, visibility * 0.2)
        self._epoch = 0
        self._replicas = replicas
        self._memory = memory
        self._stream = names.queue_stream
        self.stream = self._stream
        """The queue stream's name: a delivery's metadata names the stream it came from."""
        self._aging = aging_seconds
        self._consumers: dict[tuple[str, Channel], str] = {}
        self._consumer_lock = asyncio.Lock()
        self._idem: Any = None
        self._inboxes: dict[str, _Inbox] = {}
        self._pull_locks: dict[str, asyncio.Lock] = {}
        self._levels: dict[str, Levels] = {}
        # consumers whose last pull left nothing waiting (its last message said no more were
        # pending, or it came back empty): their next receive waits at once, without first
        # asking for a batch that is then answered "none" (a pull request a run, saved)
        self._drained: set[str] = set()
        self._delays = DelayNotes(
            js, names.idem_bucket, url=url, timeout=timeout, now=now, part=names.part
        )
        self._tag = names.id_tag
        """Put before the stream sequences this queue makes ids and hand-back notes of: the
        sequences of two partitions' queue streams coincide (``names.Names.id_tag``)."""
        self._lanes = LaneChoice(self._lane_head)
        self._probe = StreamProbe(self._topics_empty)
        """Whether any topic served stores anything, asked once a rescan for all (``_scan``)."""
        self._schedules: OrderedDict[str, int] = OrderedDict()
        """The stream sequence of each schedule this process published, by the id its
        enqueue returned: what ``cancel_delayed`` deletes."""

    async def start(self) -> None:
        self._idem = await kv_bucket(self._js, self._names.idem_bucket, url=self._url)

    # consumers ----------------------------------------------------------------------------
    async def _consumer(self, topic: str, level: Channel) -> str:
        """The consumer of the topic's messages of one kind (``t``: of the one subject of
        every level a world used before the levels)."""
        name = self._consumers.get((topic, level))
        if name is not None:
            return name
        from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy

        async with self._consumer_lock:
            name = self._consumers.get((topic, level))
            if name is not None:
                return name
            name = consumer_name(topic, level)
            config = ConsumerConfig(
                durable_name=name,
                filter_subject=self._names.target_filter(topic, level),
                ack_policy=AckPolicy.EXPLICIT,
                deliver_policy=DeliverPolicy.ALL,
                ack_wait=self._visibility,
                max_deliver=-1,  # the runtime keeps its own delivery budget (48)
                max_ack_pending=_MAX_ACK_PENDING,
                num_replicas=self._replicas,
                mem_storage=self._memory or None,
            )
            try:
                await self._ensure_consumer(topic, config)
            except WorldError:
                raise
            except Exception as err:
                raise wrap(self._url, f"creating the consumer of topic {topic!r}", err) from err
            self._consumers[(topic, level)] = name
            return name

    async def _ensure_consumer(self, topic: str, config: Any) -> None:
        """Create the topic's consumer, or use the one there, never lowering its ``ack_wait``.

        The consumer is shared by every worker of the topic, and its ``ack_wait`` is when the
        server redelivers a message its holder stopped renewing; each holder renews on its own
        visibility (every third of it) and gives a fenced delivery up just before it. A worker
        started with a shorter ``WAYLINE_VISIBILITY_SECONDS`` (a new version rolled out beside
        the old one) that wrote its own value over the consumer's would have the server
        redeliver, to anyone, messages the older workers still hold and renew too rarely: two
        handlers of one delivery. So the consumer keeps the longest visibility any worker asked
        for: a shorter one is created only where no consumer exists (a create that fails if one
        does), and a longer one raises it. (Two workers of two different longer visibilities
        racing to raise it at the same moment can still end on the shorter of theirs.)"""
        import nats.js.errors

        name = config.durable_name
        for _ in range(5):
            try:
                info = await self._js.consumer_info(self._stream, name, timeout=self._timeout)
            except nats.js.errors.NotFoundError:
                info = None
            if info is not None:
                kept = float(info.config.ack_wait or 0)
                if kept + 1e-3 >= self._visibility:
                    if kept > self._visibility + 1e-3:
                        log.info(
                            "the consumer of topic %r keeps ack_wait %gs (a worker with a longer "
                            "visibility uses it), above this world's visibility %gs: a message "
                            "whose holder died returns after %gs",
                            topic,
                            kept,
                            self._visibility,
                            kept,
                        )
                    return
                await self._js.add_consumer(self._stream, config)  # raised to this visibility
                continue  # read it back: a concurrent raise may have set another value
            if await self._create_only(config):
                return
        raise WorldError(f"NATS at {self._url}: the consumer of topic {topic!r} keeps changing")

    async def _create_only(self, config: Any) -> bool:
        """Create the consumer if none of that name exists (JetStream's ``action: create``);
        False when one does."""
        request = {"stream_name": self._stream, "config": config.as_dict(), "action": "create"}
        subject = f"$JS.API.CONSUMER.CREATE.{self._stream}.{config.durable_name}"
        resp = await self._nc.request(subject, json.dumps(request).encode(), timeout=self._timeout)
        answer = json.loads(resp.data)
        error = answer.get("error")
        if not error:
            return True
        if isinstance(error, dict) and error.get("err_code") == _CONSUMER_EXISTS:
            return False
        kind = (
            WorldUnavailableError
            if isinstance(error, dict) and error.get("code") == 503
            else WorldError
        )
        raise kind(f"NATS at {self._url}: creating consumer {config.durable_name}: {error}")

    # enqueue ------------------------------------------------------------------------------
    async def enqueue(
        self,
        topic: str,
        payload: Mapping[str, Any],
        idempotency_key: str | None,
        delay_seconds: float,
    ) -> MessageId:
        stored = carry(payload)  # the run's ordering is put on above the seam (world.sending)
        order = ordering.of_payload(stored)
        level = kind_of(order.priority, order.fairness_key)
        if order.fairness_key:  # its own lane while one is free (``lane_choice``)
            level = await self._lanes.kind(topic, order.priority, order.fairness_key)
        body = dumps(stored)
        due = self._now() + delay_seconds if delay_seconds > 0 else None
        mid = uuid.uuid4().hex
        if idempotency_key is None:
            published = await self._publish(topic, level, mid, body, due)
            assert published is not None  # only a keyed publish is refused
            ours = True
        else:
            token = key_token(idempotency_key)
            published, ours = await self._enqueue_keyed(topic, level, mid, body, due, token)
        if order.fairness_key and due is None and ours:  # stored on ``level`` as ``published``
            seq = int(published.removeprefix(self._tag))  # a partition's ids carry its tag
            self._lanes.sent(topic, level, order.fairness_key, seq)
        return published

    async def _publish(
        self,
        topic: str,
        level: Channel,
        mid: str,
        body: bytes,
        due: float | None,
        token: str | None = None,
    ) -> MessageId | None:
        """Publish one message (``Nats-Msg-Id: mid``) on the subject token ``token`` (``mid``
        when unkeyed); a keyed one only if no message or schedule under its token is stored,
        else None."""
        headers = {"Nats-Msg-Id": mid}
        if token is not None:
            headers["Nats-Expected-Last-Subject-Sequence"] = "0"
            headers["Nats-Expected-Last-Subject-Sequence-Subject"] = self._names.key_filter(token)
        target = self._names.target_subject(topic, token or mid, level)
        if due is None:
            subject = target
        else:
            subject = self._names.schedule_subject(topic, token or mid)
            headers["Nats-Schedule"] = f"@at {rfc3339(due)}"
            headers["Nats-Schedule-Target"] = target
            headers[_ID_HEADER] = mid
        acked = await publish_retried(
            self._nc,
            subject,
            body,
            headers,
            timeout=self._timeout,
            url=self._url,
            doing=f"enqueueing on topic {topic!r}",
        )
        if acked is None:
            if token is None:  # refused a sequence it never asked for: the server's mistake
                raise WorldError(
                    f"NATS at {self._url}: enqueueing on topic {topic!r} failed (the server "
                    "answered wrong last sequence to a publish that expected none)",
                    url=self._url,
                )
            return None  # the key's message is stored (maybe ours, if an ack was lost)
        if due is None:
            return MessageId(f"{self._tag}{acked.seq}")
        self._schedules[mid] = int(acked.seq)
        while len(self._schedules) > _SCHEDULES_KNOWN:
            self._schedules.popitem(last=False)
        return MessageId(mid)

    async def cancel_delayed(self, message_id: str) -> bool:
        """Delete the schedule published for ``message_id`` by this process, if it has not
        fired: a deleted schedule never fires (its stream sequence names the schedule only,
        never the message it fires, which is stored under a sequence of its own). One that
        fired already is gone from the stream, so the delete finds nothing."""
        seq = self._schedules.pop(message_id, None)
        if seq is None:
            return False
        try:
            return await delete_acked(self._nc, self._stream, seq, timeout=self._timeout)
        except Exception as err:
            raise wrap(self._url, f"cancelling delayed message {message_id}", err) from err

    async def _stored_id(self, token: str) -> MessageId | None:
        """The id of the key's message if it (or its pending schedule) is still stored."""
        try:
            msgs, _ = await direct_batch(
                self._nc,
                self._stream,
                {"seq": 1, "next_by_subj": self._names.key_filter(token), "batch": 1},
                timeout=self._timeout,
                url=self._url,
            )
        except WorldError:
            raise
        except Exception as err:
            raise wrap(self._url, "checking an idempotency key", err) from err
        if not msgs:
            return None
        msg = msgs[0]
        if not _queued(msg, self._names.schedules_prefix):
            # someone else's bytes under the key (anyone can publish to the stream): while
            # they are stored, the key's conditional publish is refused, and nothing ever
            # consumes them, so they are removed and the caller publishes again
            log.warning(
                "removing message %d on %s: not a message or schedule this world wrote, it "
                "held idempotency key %s",
                msg.seq,
                msg.subject,
                token,
            )
            await self.remove_stored(msg.seq)
            return None
        return MessageId(msg.headers.get(_ID_HEADER) or f"{self._tag}{msg.seq}")

    async def _enqueue_keyed(
        self, topic: str, level: Channel, mid: str, body: bytes, due: float | None, token: str
    ) -> tuple[MessageId, bool]:
        """One conditional publish on the key's subject token; a refusal names the stored
        message, whose id is the answer (unless it was removed meanwhile: publish again).
        With it, whether this publish stored the message (not an earlier one)."""
        for _ in range(10):
            published = await self._publish(topic, level, mid, body, due, token)
            if published is not None:
                return published, True
            stored = await self._stored_id(token)
            if stored is not None:
                return stored, False
        raise WorldUnavailableError(
            f"NATS at {self._url}: idempotency key {token} stayed contended", url=self._url
        )

    async def last_stored(self) -> int:
        """The stream sequence of the newest message stored so far (0: none yet)."""
        return await last_seq(self._js, self._stream, self._url, "reading the queue's state")

    async def remove_stored(self, seq: int) -> None:
        """Delete a stored message (retention); its idempotency key goes with it."""
        import nats.js.errors

        try:
            await self._js.delete_msg(self._stream, seq)
        except nats.js.errors.NotFoundError:
            pass
        except nats.js.errors.APIError as err:
            # gone already (acked meanwhile): the server says so with a 500, err_code 10057
            gone = err.err_code == 10057 or "no message found" in str(err).lower()
            if not gone:
                raise wrap(self._url, f"deleting message {seq}", err) from err
        except Exception as err:
            raise wrap(self._url, f"deleting message {seq}", err) from err

    # receive ------------------------------------------------------------------------------
    async def _pull(
        self, consumer: str, request: dict[str, Any], wait: float, pulled: list[Any]
    ) -> list[Any]:
        """One pull request on the consumer's inbox (pulls on one consumer take turns); waits
        for its end (batch filled or a 404/408 status), so no delivery is left behind. What
        it pulls is also added to ``pulled``, its receive's list of what it has pulled and
        not yet handed out, even when the pull ends in a cancel as its messages come: the
        receive gives those back (:meth:`receive`)."""
        lock = self._pull_locks.setdefault(consumer, asyncio.Lock())
        async with lock:
            return await self._pull_locked(consumer, request, wait, pulled)

    async def _pull_locked(
        self, consumer: str, request: dict[str, Any], wait: float, pulled: list[Any]
    ) -> list[Any]:
        msgs: list[Any] = []
        done = asyncio.Event()
        batch = int(request["batch"])
        failure: list[str] = []
        box = self._inboxes.get(consumer)
        if box is None:
            box = self._inboxes[consumer] = _Inbox(self._nc.new_inbox())
            box.sub = await wire.subscribe(self._nc, f"{box.prefix}.*", box.on_msg)
        box.count += 1
        reply = f"{box.prefix}.{box.count}"

        def on_msg(msg: Any) -> None:
            # A delivery always has its ``$JS.ACK`` reply subject; the server's status answers
            # (404, 408, heartbeats) have none. A stored message's own ``Status`` header is data.
            delivered = str(msg.reply or "").startswith("$JS.ACK")
            status = None if delivered else (msg.headers or {}).get("Status")
            if status:
                if msg.subject != reply:
                    return  # the end of an earlier pull
                if status not in ("404", "408", "100"):
                    failure.append(status)
                if status != "100":
                    done.set()
                return
            msgs.append(msg)
            if len(msgs) >= batch:
                done.set()

        lost: list[bool] = []

        def cut() -> None:
            lost.append(True)
            done.set()

        box.active, box.cut = on_msg, cut
        try:
            await wire.publish(
                self._nc,
                f"$JS.API.CONSUMER.MSG.NEXT.{self._stream}.{consumer}",
                json.dumps(request).encode(),
                reply=reply,
            )
            if not await wait_set(done, wait + self._timeout) and not msgs:
                raise WorldUnavailableError(
                    f"NATS at {self._url}: no answer to a pull on {consumer}", url=self._url
                ) from None
        finally:
            box.active = box.cut = None
            pulled += msgs  # the receive hands them out, or back if it ends otherwise
            if not done.is_set() or lost:
                # timed out, cancelled or cut off: the server may still deliver to this pull.
                # Drop the inbox, so it sees no interest and delivers nothing more (as with a
                # pull's own inbox before), and nothing late is taken for a later pull's
                self._inboxes.pop(consumer, None)
                await asyncio.shield(_unsubscribe(box.sub))
        if failure and not msgs:
            log.warning("pull on %s answered status %s", consumer, failure)
            if "503" in failure or "409" in failure:  # consumer gone: create it again
                for at, name in list(self._consumers.items()):
                    if name == consumer:
                        del self._consumers[at]
        return msgs

    async def _levels_of(self, topic: str) -> Levels:
        """The topic's record of levels, subscribed to its publishes on first use."""
        levels = self._levels.get(topic)
        if levels is None:
            levels = self._levels[topic] = Levels()
            levels.sub = await wire.subscribe(
                self._nc, self._names.topic_wildcard(topic), levels.on_msg
            )
            levels.since = time.monotonic()  # a probe asked from now on answers for the topic
        return levels

    async def _topics_empty(self) -> bool:
        """Whether nothing at all is stored under any topic this process receives on (one
        direct get over the subjects of all of them, ``multi_last``: every level, lane and
        schedule of each). Work of topics it does not serve is not asked about."""
        filters = [self._names.topic_wildcard(topic) for topic in self._levels]
        try:
            msgs, _ = await direct_batch(
                self._nc,
                self._stream,
                {"multi_last": filters, "batch": 1},
                timeout=self._timeout,
                url=self._url,
            )
        except TooManyResults:  # more subjects stored than the server lists at once
            return False
        return not msgs

    async def _first(self, subjects: str, weighed: bool) -> tuple[float, int] | None:
        """When the first message stored on ``subjects`` was stored (the server's clock) and,
        if ``weighed``, the fairness weight it carries (else 1); None when none is stored. A
        stored message may be held already: the stream keeps it until its ack, and no single
        request tells the ready ones apart."""
        msgs, _ = await self._head(subjects)
        if not msgs:
            return None
        try:
            at = parse_stamp(str(msgs[0].headers.get("Nats-Time-Stamp", "")))
        except ValueError:
            at = self._now()
        return at, _weight(msgs[0].data) if weighed else 1

    async def _scan(self, topic: str, levels: Levels) -> None:
        """Ask whether any topic this process serves on the stream stores anything
        (``StreamProbe``: one question a rescan period for all of them); only when one does,
        ask whether this topic does (one direct get over every subject of the topic, schedules
        included), and only when that finds something, ask about every subject of the topic
        (the fair lanes only every ``LANE_SCAN_EVERY``-th time) and its schedules, all at
        once. An idle worker so costs one request a queue stream and rescan, whatever its
        topics, levels and lanes, where asking each topic cost one, and asking each subject
        cost twelve a topic (ninety-two every fourth time)."""
        # First the probe, shared by every topic this process serves on the stream: asked
        # after this topic's last scan (or after its record began to hear publishes), so it
        # saw whatever was stored before. Nothing stored then, and no publish on the topic
        # heard since it was asked: the topic stores nothing, and every subject of its record
        # is found empty as of when the probe was asked, the time its next rescan counts from.
        asked_at, empty = await self._probe.since(
            levels.since if levels.scanned_at is None else levels.scanned_at
        )
        heard = {level: levels.heard(level) for level in _CHANNELS}
        if empty and levels.heard_at < asked_at:
            levels.scanned_at = asked_at
            levels.scanned(set(), heard, set())
            return
        levels.scanned_at = time.monotonic()
        # Counted before the question: a publish heard during it keeps its subject recorded.
        heard = {level: levels.heard(level) for level in _CHANNELS}
        msgs, _ = await self._head(self._names.topic_wildcard(topic))
        if not msgs:  # nothing stored on any subject of the topic: no level, lane, schedule
            levels.scanned(set(), heard, set())
            return
        kinds = _CHANNELS if levels.scans % LANE_SCAN_EVERY == 0 else PLAIN_KINDS
        levels.scans += 1
        heard = {level: heard[level] for level in kinds}
        subjects = [self._names.target_filter(topic, level) for level in kinds]
        stamps, scheduled = await asyncio.gather(
            asyncio.gather(*(self._first(s, False) for s in subjects)),
            self._scheduled_levels(topic),
        )
        found = {level for level, at in zip(kinds, stamps, strict=True) if at is not None}
        # The topic's first stored message is on a subject the question named: a fair lane's
        # is so found by this scan even when it is not one that asks the lanes.
        first = msgs[0].subject.split(".")
        if len(first) == 5 and first[2] in _CHANNELS:
            found.add(first[2])
        levels.scanned(found, heard, scheduled)

    async def _scheduled_levels(self, topic: str) -> set[Channel]:
        """The subjects the topic's pending schedules fire onto (their
        ``Nats-Schedule-Target``). When there are more than one request reads: every subject
        of work without a key, and the lanes of those read (the lane scan finds the others)."""
        msgs, pending = await direct_batch(
            self._nc,
            self._stream,
            {"seq": 1, "next_by_subj": self._names.schedule_filter(topic), "batch": 256},
            timeout=self._timeout,
            url=self._url,
        )
        out: set[Channel] = set(PLAIN_KINDS) if pending > 0 else set()
        for msg in msgs:
            target = str(msg.headers.get("Nats-Schedule-Target", "")).split(".")
            kind = target[2] if len(target) == 5 else ""
            try:
                kind_level(kind)
            except ValueError:  # not a schedule this world wrote: it fires nowhere it serves
                continue
            out.add(kind)
        return out

    async def _order(self, topic: str, levels: Levels, batch: int) -> list[_Turns]:
        """The subjects that may hold a message, in the order they are served, each with how
        many of a receive's ``batch`` it is asked for (``_plan``: rule 1 of
        ``ordering``, aging included, over when each subject's first stored message was
        stored, then fair turns between a level's lanes)."""
        asked = sorted(levels.stored)
        if len(asked) <= 1:
            return [_Turns(level, batch, 1) for level in asked]  # nothing to order or ask
        heard = {level: levels.heard(level) for level in asked}
        firsts = await asyncio.gather(
            *(
                self._first(self._names.target_filter(topic, level), bool(kind_lane(level)))
                for level in asked
            )
        )
        found: dict[Channel, tuple[float, int]] = {}
        for level, first in zip(asked, firsts, strict=True):
            if first is None:
                levels.found_empty(level, heard[level])
            else:
                found[level] = first
        return _plan(found, levels.fair, batch, self._now(), self._aging)

    async def _take(
        self, topic: str, levels: Levels, order: list[_Turns], batch: int, into: list[Any]
    ) -> list[tuple[Any, float]]:
        """Up to ``batch`` messages pulled at once from the subjects in ``order``, each asked
        for no more than its turns, handed out level by level in the order of their fair
        turns (``Levels.take_turns``, which moves each level's fair clock). ``into``: the
        receive's list of what it pulled (``_pull``)."""
        pulled: dict[int, list[tuple[Channel, int, list[tuple[Any, float]]]]] = {}
        count = 0
        failed: WorldError | None = None
        for turns in order:
            ask = min(turns.count, batch - count)
            if ask <= 0:
                continue
            level = turns.channel
            try:
                consumer = await self._consumer(topic, level)
                sent = time.monotonic()
                msgs = await self._pull(consumer, {"batch": ask, "no_wait": True}, 0.0, into)
            except WorldError as err:
                # One level that cannot be asked (its consumer refused by the server, or not
                # reachable while its leader is elected) must not hold up the topic's other
                # levels, nor the messages already pulled from the levels before it, which
                # would otherwise be held by no one until their ack wait ran out. The next
                # receive asks it again.
                log.warning("receiving level %s of topic %r failed: %s", level, topic, err)
                failed = err
                continue
            count += len(msgs)
            pulled.setdefault(kind_level(level), []).append(
                (level, turns.weight, [(msg, sent) for msg in msgs])
            )
            self._note_drained(consumer, msgs)
            if count >= batch:
                break
        if failed is not None and not count:
            raise failed
        got: list[tuple[Any, float]] = []
        for level_pulled in pulled.values():  # levels in the order they were pulled
            got += levels.take_turns(kind_level(level_pulled[0][0]), level_pulled)
        return got

    async def _wait_one(
        self, topic: str, level: Channel, wait: float, into: list[Any]
    ) -> list[tuple[Any, float]]:
        """One message of the only level that may hold one, handed over as soon as it comes
        (one long pull); a message of another level sent meanwhile waits for its end.
        ``into``: the receive's list of what it pulled (``_pull``)."""
        consumer = await self._consumer(topic, level)
        expires = max(int(wait * 1e9), 1_000_000)
        sent = time.monotonic()
        msgs = await self._pull(consumer, {"batch": 1, "expires": expires}, wait, into)
        self._note_drained(consumer, msgs)
        return [(msg, await self._hold_start(msg, sent)) for msg in msgs]

    def _note_drained(self, consumer: str, msgs: list[Any]) -> None:
        """Whether messages are pending after the last one: ask for a batch first next time
        (a hint only: a wrong guess costs a pull, or takes a backlog one message at a time).
        ``num_pending`` counts only messages never delivered: after a redelivery (a nak, a hold
        that ran out) others may be due again, so batches first."""
        last = msgs[-1].metadata if msgs else None
        if last is None or (last.num_pending == 0 and last.num_delivered == 1):
            self._drained.add(consumer)
        else:
            self._drained.discard(consumer)

    async def receive(self, topic: str, max_messages: int, wait_seconds: float) -> list[Delivery]:
        batch = max(1, max_messages)
        epoch = self._epoch
        deadline = time.monotonic() + max(0.0, wait_seconds)
        # What this receive pulled and has not handed out, passed down to its pulls rather
        # than kept by its task: finding the task asks asyncio for the running loop, a
        # getpid call on CPython 3.11, twice a receive (issue #39).
        pulled: list[Any] = []
        try:
            return await self._receive(topic, batch, deadline, epoch, pulled)
        except BaseException:
            # Cancelled (or failed) with messages pulled: the server holds them for this
            # receive until their ack wait runs out; handed back, the next receive gets them.
            if pulled:
                await asyncio.shield(self._give_back(list(pulled)))
            raise

    async def _receive(
        self, topic: str, batch: int, deadline: float, epoch: int, pulled: list[Any]
    ) -> list[Delivery]:
        try:
            levels = await self._levels_of(topic)
            got: list[tuple[Any, float]] = []
            while True:
                seen = levels.count  # before the questions: a publish during them is not missed
                await connected(self._nc, timeout=self._timeout, url=self._url)
                # The rescan is due by the clock, not by how the last receive ended: a worker
                # whose receives each end in a wait on its one known level (its deadline
                # reached, or a message taken) would otherwise never look again, and a message
                # on a level no publish told it of (sent while its connection was cut by a
                # partition) would wait for ever.
                rescan_at = (levels.scanned_at or 0.0) + RESCAN_SECONDS
                if levels.scanned_at is None or time.monotonic() >= rescan_at:
                    await self._scan(topic, levels)
                    rescan_at = (levels.scanned_at or 0.0) + RESCAN_SECONDS
                order = await self._order(topic, levels, batch)
                left = deadline - time.monotonic()
                only = order[0].channel if len(order) == 1 else None
                if only is not None and left > 0 and consumer_name(topic, only) in self._drained:
                    # waits no longer than the next rescan is due: what no publish told is found
                    until_rescan = max(_POLL_SECONDS, rescan_at - time.monotonic())
                    wait = min(left, until_rescan, _ONE_PULL_SECONDS)
                    got = await self._wait_one(topic, only, wait, pulled)
                else:
                    got = await self._take(topic, levels, order, batch, pulled)
                left = deadline - time.monotonic()
                if got or left <= 0 or self._epoch != epoch:
                    break  # a connection lost (or the world closed) ends the wait at once
                if len(order) > 1 or (not order and levels.scheduled):
                    # one level: its consumer is drained, the next turn waits. A schedule
                    # pending on a level of the record fires without a publish this process
                    # hears: the next turn's questions find its message, a rescan too late.
                    await levels.wait_after(seen, min(left, _POLL_SECONDS))
                elif not order:
                    # Nothing stored, and no schedule pending: only a publish this process
                    # hears or the next rescan can find something, so the wait lasts until
                    # one of them. Each turn of the loop asked nothing, and turns of
                    # _POLL_SECONDS woke every idle receive four times a second, for nothing.
                    until_rescan = max(_POLL_SECONDS, rescan_at - time.monotonic())
                    await levels.wait_after(seen, min(left, until_rescan))
        except WorldError:
            raise
        except Exception as err:
            raise wrap(self._url, f"receiving on topic {topic!r}", err) from err
        out = []
        for msg, sent in got:
            md = msg.metadata
            headers = msg.headers or {}
            mid = _message_id(
                msg.subject, headers.get(_ID_HEADER), int(md.sequence.stream), self._tag
            )
            raw = bytes(msg.data or b"")
            # the epoch of before the pull: a connection lost meanwhile ends this hold too
            held = _Held(msg, sent + self._visibility, epoch=epoch)
            if md.num_delivered > 1:
                seq = int(md.sequence.stream)
                held.handbacks = await self._handbacks(seq, int(md.num_delivered))
                if held.handbacks:  # a hand-back over a pause is one of them
                    held.held_handbacks, held.held_note = await self._held_handbacks(
                        seq, held.handbacks, int(md.num_delivered)
                    )
                await self._delays.drop(str(md.consumer), int(md.sequence.stream))
            # The stream stamps a message when it is stored, which for a delayed one is when
            # its schedule fires: due then, for a first delivery.
            stamp = getattr(md, "timestamp", None)
            due = stamp.timestamp() if stamp is not None and md.num_delivered == 1 else None
            out.append(
                Delivery(
                    plain_topic(topic),
                    MessageId(mid),
                    int(md.num_delivered) - held.handbacks,
                    decode_payload(raw),
                    raw,
                    held,
                    due,
                    held_since=sent,
                    handbacks=held.handbacks,
                    held_handbacks=held.held_handbacks,
                )
            )
        return out

    async def _give_back(self, msgs: list[Any]) -> None:
        """Hand back messages pulled by a receive that never handed them out: a nak each,
        noted as a hand-back (not an attempt), as :meth:`release` notes one; a held run of
        hand-backs goes on past it (its note is moved to this delivery)."""
        for msg in msgs:
            md = msg.metadata
            seq, delivered = int(md.sequence.stream), int(md.num_delivered)
            try:
                handbacks = await self._handbacks(seq, delivered) if delivered > 1 else 0
                await self._idem.put(f"h{self._tag}{seq}", str(handbacks + 1).encode())
                if handbacks:
                    count, found = await self._held_handbacks(seq, handbacks, delivered)
                    if found and count:
                        note = f"{count}@{delivered}".encode()
                        await self._idem.put(f"g{self._tag}{seq}", note)
                await wire.publish(self._nc, msg.reply, _nak(0.0))
            except Exception as err:  # its ack wait runs out: redelivered then, counted
                log.warning("could not hand back message %s of a cancelled receive: %s", seq, err)

    # Graceful hand-backs: JetStream counts every nak as a delivery, so a hand-back is noted
    # under ``h<stream seq>`` in the idempotency bucket (read only on a redelivery) and
    # subtracted from the attempt; the note goes with the message's ack. The hand-backs over a
    # pause in a row are noted apart, under ``g<stream seq>`` (read only when ``h`` counts
    # some): a version that reads only ``h`` is not misled by it, and a message noted by such
    # a version has none (0). A ``g`` note names the delivery that made its last hand-back
    # (``<count>@<num_delivered>``): it counts only for the delivery right after that one, so a
    # redelivery after the holder died (its ack wait ran out: a counted delivery, as a retry
    # is) starts the count again, with no round trip to drop the note.
    async def _handbacks(self, seq: int, delivered: int) -> int:
        """The hand-backs noted for message ``seq``: a count of earlier deliveries, so 0 to
        ``delivered - 1``; a note that is not (bytes anyone can write into the bucket) counts
        as none, so it can neither break the receive nor move the attempt past the budget."""
        return await self._note(f"h{self._tag}{seq}", delivered - 1, "hand-backs", seq)

    async def _held_handbacks(self, seq: int, handbacks: int, delivered: int) -> tuple[int, bool]:
        """The hand-backs over a pause in a row noted for message ``seq``, 0 to ``handbacks``,
        and whether a note was found: one made by another delivery than the one just before
        this (``delivered - 1``) counts none, as does a note that is not (it only shortens a
        held hand-back)."""
        raw = await self._read_note(f"g{self._tag}{seq}", "held hand-backs", seq)
        if raw is None:
            return 0, False
        count, _, by = raw.partition(b"@")
        if not (len(count) <= 9 and count.isdigit() and len(by) <= 9 and by.isdigit()):
            log.warning("ignoring the held hand-backs note of message %s: %r", seq, raw[:64])
            return 0, True
        if int(by) != delivered - 1 or int(count) > handbacks:
            return 0, True  # its holder died after it (or a stray): the run of them ended
        return int(count), True

    async def _note(self, key: str, at_most: int, what: str, seq: int) -> int:
        raw = await self._read_note(key, what, seq)
        if raw is None:
            return 0
        raw = raw or b"0"
        count = int(raw) if len(raw) <= 9 and raw.isdigit() else -1
        if not 0 <= count <= at_most:
            log.warning("ignoring the %s note of message %s: %r", what, seq, raw[:64])
            return 0
        return count

    async def _read_note(self, key: str, what: str, seq: int) -> bytes | None:
        """The bytes noted under ``key``; None when there is no note or it cannot be read."""
        import nats.js.errors

        try:
            entry = await self._idem.get(key)
        except nats.js.errors.KeyNotFoundError:  # deleted ones too (KeyDeletedError)
            return None
        except Exception as err:
            log.warning("could not read the %s of message %s: %s", what, seq, err)
            return None
        return bytes(entry.value or b"")

    async def release(
        self, delivery: Delivery, delay_seconds: float = 0.0, *, held: bool = False
    ) -> bool:
        hold = self._fresh(delivery)
        if hold is None:
            return False
        seq = int(hold.msg.metadata.sequence.stream)
        try:
            await self._idem.put(f"h{self._tag}{seq}", str(hold.handbacks + 1).encode())
        except Exception as err:
            log.warning("could not note the hand-back of message %s: %s", seq, err)
            return await self.retry(delivery, delay_seconds)
        hold.handbacks += 1
        if held:
            try:
                by = int(hold.msg.metadata.num_delivered)  # counted by the next delivery only
                note = f"{hold.held_handbacks + 1}@{by}".encode()
                await self._idem.put(f"g{self._tag}{seq}", note)
                hold.held_handbacks += 1
            except Exception as err:  # the next hand-back over the pause is shorter: no more
                log.warning("could not note the held hand-back of message %s: %s", seq, err)
        else:
            await self._end_held_run(hold)
        return await self._delayed(delivery, delay_seconds, "hand-back")

    async def _end_held_run(self, hold: _Held) -> None:
        """Start the count of held hand-backs again (another hand-back, a retry): before the
        nak, so that no redelivery can read the old count."""
        if not hold.held_handbacks:
            return
        seq = int(hold.msg.metadata.sequence.stream)
        try:
            await self._idem.delete(f"g{self._tag}{seq}")
            hold.held_handbacks = 0
        except Exception as err:  # a later pause's first hand-backs are longer: no more
            log.warning("could not drop the held hand-backs of message %s: %s", seq, err)

    async def _hold_start(self, msg: Any, sent: float) -> float:
        """When the hold of a delivery from a long pull began, as far as this process can
        prove: the server delivered it after it had the pull request, so no earlier than
        ``sent``. While that costs the hold less than the settlement margin, ``sent`` it is;
        past that the hold is confirmed from now with a ``+WPI`` (``-inf`` when that fails:
        the delivery is then treated as no longer held)."""
        now = time.monotonic()
        if now - sent <= self._margin:
            return sent
        try:
            await self._nc.request(msg.reply, b"+WPI", timeout=self._timeout)
        except Exception as err:
            log.warning("could not confirm the delivery of %s: %s", msg.reply, err)
            return float("-inf")
        return now

    # settle -------------------------------------------------------------------------------
    # JetStream acks a superseded delivery's reply subject as if it were current (measured on
    # nats-server 2.15: A's ack after B received the redelivery removes B's message), and an
    # in-progress or nak of it would extend or release B's hold. So a holder settles only while
    # it provably still holds the delivery: the server redelivers no earlier than one ack wait
    # after the delivery or after the last in-progress it confirmed, both measured from when
    # this process sent the request. Past that, less a margin for the settlement's own trip,
    # a settlement is a no-op answering False (the message may be another's by now; leaving it
    # costs at most one more replay of an idempotent wake). An unconfirmed ack is never turned
    # into a delete of the stored message: that would remove it for whoever holds it next.
    # An ack is told, not asked: no reply is awaited (one round trip less per delivery). A
    # lost one (a connection lost before the server read it) brings the message back after
    # its ack wait, one more wake of what is already done (the run's log, the step's record,
    # say so), as any redelivery can. An ack whose hand-back note is removed after it waits
    # for the server's confirmation (the note must outlive the message).
    def lost_connection(self) -> None:
        """Every delivery held so far stops being provably this process's: a server that
        crashed can come back without them and redeliver them to others, while it still
        confirms this process's renewals (measured by ``make soak``: two bodies of one step at
        once after a nats-server SIGKILL). Their renewals answer False from now on, so the
        worker fences them (cuts their bodies off) before any redelivery can run beside them.
        A pull in progress ends at once with what it got (its answer is lost with the
        connection), instead of waiting out its wait and the request timeout."""
        self._epoch += 1
        for box in list(self._inboxes.values()):
            if box.cut is not None:
                box.cut()
        for levels in self._levels.values():
            levels.wake()  # a receive waiting on a topic that stores nothing

    def _fresh(self, delivery: Delivery) -> _Held | None:
        held: _Held = delivery.handle
        if (
            held.settled
            or held.epoch != self._epoch
            or time.monotonic() >= held.fresh_until - self._margin
        ):
            return None
        return held

    async def _answer(
        self, delivery: Delivery, body: bytes, what: str, *, confirm: bool = True
    ) -> bool:
        """Send one settlement: as a request, True once the server confirmed it; without
        ``confirm``, one way, True once sent while this process still held the delivery."""
        import nats.errors

        held = self._fresh(delivery)
        if held is None:
            return False
        sent = time.monotonic()
        try:
            await connected(self._nc, timeout=self._timeout, url=self._url)
            if confirm:
                await self._nc.request(held.msg.reply, body, timeout=self._timeout)
            else:
                await wire.publish(self._nc, held.msg.reply, body)
        except (nats.errors.TimeoutError, TimeoutError, nats.errors.NoRespondersError) as err:
            if body == b"+WPI":
                # Unconfirmed is not refused: a consumer electing its leader answers nothing
                # for seconds. The delivery stays this process's until one ack wait after
                # its last confirmed renewal, and the worker fences it only if renewals keep
                # failing; a False here would cut its bodies off at once.
                raise wrap(self._url, f"{what} of message {delivery.message_id}", err) from err
            log.warning("%s of message %s unconfirmed (%s)", what, delivery.message_id, err)
            return False
        except Exception as err:
            raise wrap(self._url, f"{what} of message {delivery.message_id}", err) from err
        if body == b"+WPI":
            held.fresh_until = sent + self._visibility
        else:
            held.settled = True
            held.msg._ackd = True  # nats-py's own flag: this delivery is settled
        return True

    async def ack(self, delivery: Delivery) -> bool:
        held: _Held = delivery.handle
        # a hand-back note goes once the message is provably gone (a lost ack with the note
        # gone would count the next delivery's hand-backs as attempts): that ack is confirmed
        if not await self._answer(delivery, b"+ACK", "ack", confirm=bool(held.handbacks)):
            return False
        if held.handbacks:
            seq = held.msg.metadata.sequence.stream
            notes = [f"h{self._tag}{seq}"] + ([f"g{self._tag}{seq}"] if held.held_note else [])
            for note in notes:
                try:
                    await self._idem.delete(note)
                except Exception as err:  # stream sequences are never reused: a stray is inert
                    log.warning("could not drop the note %s of %s: %s", note, seq, err)
        return True

    async def retry(self, delivery: Delivery, delay_seconds: float) -> bool:
        held = self._fresh(delivery)
        if held is not None:
            await self._end_held_run(held)
        return await self._delayed(delivery, delay_seconds, "retry")

    async def _delayed(self, delivery: Delivery, delay_seconds: float, what: str) -> bool:
        """Nak ``delivery`` to come back after ``delay_seconds``, noting a delay so the message
        is not counted in flight while it waits (``delay_notes``)."""
        held: _Held = delivery.handle
        if not await self._answer(delivery, _nak(delay_seconds), what):
            return False
        if delay_seconds > 0:
            md = held.msg.metadata
            await self._delays.note(str(md.consumer), int(md.sequence.stream), delay_seconds)
        return True

    async def renew(self, delivery: Delivery) -> bool:
        return await self._answer(delivery, b"+WPI", "renewal")

    async def dead_letter(self, delivery: Delivery, reason: str) -> bool:
        held = self._fresh(delivery)
        if held is None:
            return False
        record = {
            "messageId": str(delivery.message_id),
            "topic": delivery.topic,
            "payload": delivery.raw.decode(errors="replace"),
            "attempts": delivery.attempt,
            "reason": reason,
        }
        mid = f"dl-{self._stream}-{held.msg.metadata.sequence.stream}"
        try:
            ack = await self._js.publish(
                self._names.dlq_subject,
                dumps(record),
                headers={"Nats-Msg-Id": mid},
                timeout=self._timeout,
            )
            if ack.duplicate and not await self._dead_letter_of(ack.seq, record):
                # someone else's bytes under the id: this record is stored under a fresh one
                await self._js.publish(
                    self._names.dlq_subject,
                    dumps(record),
                    headers={"Nats-Msg-Id": f"{mid}-{uuid.uuid4().hex}"},
                    timeout=self._timeout,
                )
        except Exception as err:
            raise wrap(self._url, f"dead-lettering message {delivery.message_id}", err) from err
        # set aside but not confirmed removed: a redelivery dedupes its record to this one
        return await self.ack(delivery)

    async def _dead_letter_of(self, seq: int, record: Mapping[str, Any]) -> bool:
        """Whether the DLQ's message ``seq`` is a record of the same message (an earlier
        dead-lettering of it, whose ack was lost: its attempt count may differ)."""
        stored = await self._js.get_msg(self._names.dlq_stream, seq)
        try:
            earlier = entries.loads(stored.data)
        except entries.Unreadable:
            return False
        return (
            stored.subject == self._names.dlq_subject
            and isinstance(earlier, dict)
            and all(earlier.get(k) == record[k] for k in ("messageId", "topic", "payload"))
        )

    async def stored(
        self, subjects: str | None = None
    ) -> AsyncIterator[tuple[StoredMsg, dict[str, Any]]]:
        """Every stored message and pending schedule (queued, delayed or in flight), or those
        on ``subjects`` (a filter), with its payload; a payload that is not a JSON object is
        skipped."""
        start = 1
        while True:
            try:
                msgs, pending = await direct_batch(
                    self._nc,
                    self._stream,
                    {
                        "seq": start,
                        "next_by_subj": subjects or self._names.queue_wildcard,
                        "batch": 512,
                    },
                    timeout=self._timeout,
                    url=self._url,
                )
            except WorldUnavailableError:
                raise
            except Exception as err:
                raise wrap(self._url, "scanning the queue", err) from err
            for msg in msgs:
                try:
                    payload = entries.loads(msg.data)
                except entries.Unreadable:
                    continue
                if isinstance(payload, dict):
                    yield msg, payload
            if not msgs or pending <= 0:
                return
            start = msgs[-1].seq + 1

    async def depths(self) -> list[QueueDepth]:
        """The messages on each topic's target subjects that its consumer has not delivered
        yet (a pending schedule is delayed, not ready). A delivered message is held, or waits
        for its redelivery, so it is not counted: after its holder died it is counted again
        only once delivered again (a consumer's redeliveries have no sequence to compare)."""
        import nats.js.errors

        delivered: dict[tuple[str, Channel], int] = {}
        found: dict[str, tuple[int, float]] = {}
        async for msg, _ in self.stored():
            parts = msg.subject.split(".")
            topic = token_value(parts[3]) if len(parts) == 5 else None
            level = parts[2] if len(parts) == 5 else ""
            try:
                kind_level(level)
            except ValueError:  # a schedule
                continue
            if topic is None:  # a topic too long to name (hashed)
                continue
            if (topic, level) not in delivered:
                try:
                    info = await self._js.consumer_info(
                        self._stream, consumer_name(topic, level), timeout=self._timeout
                    )
                    delivered[(topic, level)] = int(info.delivered.stream_seq or 0)
                except nats.js.errors.NotFoundError:  # no worker ever consumed the level
                    delivered[(topic, level)] = 0
                except Exception as err:
                    raise wrap(self._url, f"reading the consumer of topic {topic!r}", err) from err
            if msg.seq <= delivered[(topic, level)]:
                continue
            try:
                at = parse_stamp(str(msg.headers.get("Nats-Time-Stamp", "")))
            except ValueError:
                continue
            count, oldest = found.get(topic, (0, at))
            found[topic] = (count + 1, min(oldest, at))
        return [QueueDepth(t, n, at) for t, (n, at) in sorted(found.items())]

    async def _consumers_of(self, topic: str) -> dict[Channel, str]:
        """The kinds of the topic whose consumer exists, each with its name: one listing of
        the stream's consumer names (``$JS.API.CONSUMER.NAMES``, 1,024 names a page) instead
        of a question about each of the 91 a topic may have. A consumer made after the listing
        is taken for absent, which the callers count as before it existed."""
        wanted = {consumer_name(topic, kind): kind for kind in _CHANNELS}
        found: dict[Channel, str] = {}
        offset = 0
        while True:
            resp = await self._nc.request(
                f"$JS.API.CONSUMER.NAMES.{self._stream}",
                json.dumps({"offset": offset}).encode(),
                timeout=self._timeout,
            )
            answer = json.loads(resp.data)
            if answer.get("error"):
                raise WorldError(
                    f"NATS at {self._url}: listing the consumers of {self._stream}: "
                    f"{answer['error']}",
                    url=self._url,
                )
            names = answer.get("consumers") or []
            for name in names:
                if name in wanted:
                    found[wanted[name]] = name
            offset += len(names)
            if not names or offset >= int(answer.get("total") or 0):
                return found

    async def _infos(self, topic: str) -> dict[Channel, Any]:
        """The info of each of the topic's consumers that exists (one deleted between the
        listing and its question is left out, as if never made)."""
        import nats.js.errors

        consumers = await self._consumers_of(topic)

        async def info(name: str) -> Any:
            try:
                return await self._js.consumer_info(self._stream, name, timeout=self._timeout)
            except nats.js.errors.NotFoundError:
                return None

        infos = await asyncio.gather(*(info(name) for name in consumers.values()))
        return {kind: i for kind, i in zip(consumers, infos, strict=True) if i is not None}

    async def _head(self, subjects: str) -> tuple[list[StoredMsg], int]:
        """The first message stored on ``subjects`` (none when none is), and how many more
        match after it (one direct get)."""
        return await direct_batch(
            self._nc,
            self._stream,
            {"seq": 1, "next_by_subj": subjects, "batch": 1},
            timeout=self._timeout,
            url=self._url,
        )

    async def _lane_head(self, topic: str, kind: Channel) -> StoredMsg | None:
        """The first message stored on one lane of the topic (None: the lane is empty)."""
        try:
            msgs, _ = await self._head(self._names.target_filter(topic, kind))
        except WorldError:
            raise
        except Exception as err:
            raise wrap(self._url, f"choosing a lane on topic {topic!r}", err) from err
        return msgs[0] if msgs else None

    async def _stored_count(self, subjects: str) -> int:
        """How many messages are stored on ``subjects``."""
        msgs, pending = await self._head(subjects)
        return len(msgs) + max(0, pending)

    async def ready(self, topic: str) -> int:
        """The topic's messages never delivered yet (the ``num_pending`` of its consumer of
        each kind). A kind no worker has consumed has no consumer: every message stored on it
        counts. Delayed messages are schedules on another subject until they fire, so they
        are not counted.

        The kinds without a consumer are usually empty (a lane no key hashed to), and asking
        each of them would cost most of the 91 questions. So the count first compares the
        messages stored on the topic, less its schedules, with what its consumers account for
        (``num_pending`` and ``num_ack_pending``: a work queue keeps a message until its ack);
        only when they differ (a kind without a consumer holds messages, or the topic changed
        during the count, or something else was stored under it) are the kinds without a
        consumer counted: from one listing of the topic's subjects while it holds at most
        ``_LISTED_AT_MOST`` messages, else by asking each of them, as before."""

        async def stored_on(level: Channel) -> int:
            stream = await self._js.stream_info(
                self._stream, subjects_filter=self._names.target_filter(topic, level)
            )
            return sum((stream.state.subjects or {}).values())

        try:
            infos, stored, scheduled = await asyncio.gather(
                self._infos(topic),
                self._stored_count(self._names.topic_wildcard(topic)),
                self._stored_count(self._names.schedule_filter(topic)),
            )
            pending = sum(int(i.num_pending or 0) for i in infos.values())
            held = sum(int(i.num_ack_pending or 0) for i in infos.values())
            if stored - scheduled == pending + held:
                return pending
            missing = [level for level in _CHANNELS if level not in infos]
            if stored > _LISTED_AT_MOST:
                return pending + sum(await asyncio.gather(*(stored_on(level) for level in missing)))
            # One stream info lists every subject of the topic (one a message): cheaper than a
            # question per kind without a consumer while the topic holds few messages.
            listed = await self._js.stream_info(
                self._stream, subjects_filter=self._names.topic_wildcard(topic)
            )
            kinds = set(missing)
            for subject, n in (listed.state.subjects or {}).items():
                parts = subject.split(".")
                if len(parts) == 5 and parts[2] in kinds:
                    pending += int(n)
            return pending
        except WorldUnavailableError:
            raise
        except Exception as err:
            raise wrap(self._url, f"counting the ready messages of topic {topic!r}", err) from err

    async def in_flight(self, topic: str) -> int:
        """The topic's messages delivered and not yet acked (the ``num_ack_pending`` of its
        consumer of each kind), less those handed back with a delay still running: JetStream
        keeps those in that count until it delivers them again, though no worker holds them
        (``delay_notes``). A kind with no consumer has none."""
        try:
            infos = await self._infos(topic)
            pending = {
                consumer_name(topic, kind): int(info.num_ack_pending or 0)
                for kind, info in infos.items()
            }
            pending = {consumer: n for consumer, n in pending.items() if n}
            if not pending:
                return 0
            waiting = await self._delays.ahead(set(pending))
            return sum(max(0, n - len(waiting.get(c, []))) for c, n in pending.items())
        except WorldUnavailableError:
            raise
        except Exception as err:
            raise wrap(
                self._url, f"counting the in-flight messages of topic {topic!r}", err
            ) from err

    async def delayed(self, topic: str, before: float) -> int:
        """The topic's messages that wait out a delay and fall due at or before ``before``:
        its pending schedules (a delayed enqueue, whose ``Nats-Schedule: @at`` header says
        when it fires) and its messages handed back with a delay (``delay_notes``)."""
        count = 0
        async for msg, _ in self.stored(self._names.schedule_subject(topic, "*")):
            at = str((msg.headers or {}).get("Nats-Schedule", ""))
            try:
                due = parse_stamp(at.removeprefix("@at "))
            except ValueError:  # not a schedule this queue wrote: not one of its delays
                continue
            count += due <= before
        # A message handed back with a delay is noted under the consumer of its own kind.
        noted = await self._delays.ahead({consumer_name(topic, kind) for kind in _CHANNELS})
        return count + sum(due_ms <= before * 1000 for dues in noted.values() for due_ms in dues)

    async def drain_lanes(self, held_too: bool) -> LaneDrain:
        """Move queued work to the subject a release before the levels reads
        (``lane_drain``)."""
        try:
            return await lane_drain.drain(
                self.stored,
                self.remove_stored,
                self._nc,
                self._js,
                self._names,
                timeout=self._timeout,
                url=self._url,
                held_too=held_too,
                waiting=await self._delays.waiting(),
            )
        except WorldError:
            raise
        except Exception as err:
            raise wrap(self._url, "moving queued work off the levels and lanes", err) from err

    async def list_dead_letters(self, limit: int) -> list[dict[str, Any]]:
        if limit <= 0:
            return []
        try:
            info = await self._js.stream_info(self._names.dlq_stream)
            last, first = int(info.state.last_seq), int(info.state.first_seq)
            if info.state.messages == 0:
                return []
            msgs, _ = await direct_batch(
                self._nc,
                self._names.dlq_stream,
                {"seq": max(first, last - limit + 1), "batch": limit},
                timeout=self._timeout,
                url=self._url,
            )
        except WorldError:
            raise
        except Exception as err:
            raise wrap(self._url, "listing dead letters", err) from err
        out = []
        for msg in reversed(msgs):
            try:
                record = entries.loads_object(msg.data)
            except entries.Unreadable as err:
                record = {
                    "messageId": str(msg.seq),
                    "topic": "",
                    "payload": msg.data.decode(errors="replace"),
                    "attempts": 0,
                    "reason": f"an unreadable dead-letter record ({err})",
                }
            try:
                record["createdAt"] = parse_stamp(msg.headers.get("Nats-Time-Stamp", ""))
            except (ValueError, IndexError, OverflowError):
                record["createdAt"] = 0.0
            out.append(record)
        return out[:limit]


@dataclass(frozen=True, slots=True)
class _Turns:
    """How many messages a receive asks of one subject, and the fairness weight its turns
    were counted with (its first message's)."""

    channel: Channel
    count: int
    weight: int


def _weight(data: bytes) -> int:
    """The fairness weight a stored message carries (1 when it carries none, or is not a
    payload this world wrote)."""
    try:
        payload = entries.loads(data)
    except entries.Unreadable:
        return 1
    return ordering.of_payload(payload if isinstance(payload, dict) else None).fairness_weight


def _plan(
    firsts: Mapping[Channel, tuple[float, int]],
    clocks: Mapping[int, ordering.FairClock],
    batch: int,
    now: float,
    aging: float,
) -> list[_Turns]:
    """The subjects of ``firsts`` (each mapped to when its first stored message was stored,
    and that message's fairness weight) in the order they are served, with the turns each
    gets of ``batch``: ``ordering.level_order`` over the levels (the subject before the levels
    is the default level, which it holds), then within a level ``batch`` turns given by start
    time fair queuing over its lanes (``_fair_turns``). Each level is planned for the whole
    batch: what its subjects do not hold goes to the next level."""
    at_level: dict[int, float] = {}
    for channel, (at, _) in firsts.items():
        level = kind_level(channel)
        at_level[level] = min(at, at_level.get(level, at))
    plan: list[_Turns] = []
    for level in ordering.level_order(at_level, now, aging):
        lanes = {c: first for c, first in firsts.items() if kind_level(c) == level}
        plan += _fair_turns(lanes, clocks.get(level), batch)
    return plan


def _fair_turns(
    lanes: Mapping[Channel, tuple[float, int]], clock: ordering.FairClock | None, batch: int
) -> list[_Turns]:
    """``batch`` turns among one level's subjects, in the order of their first turn: each
    turn goes to the lane of the lowest start tag (``ordering.FairClock``, rule 2, with a lane
    in place of a key: the subjects of work without a key share the lane ``""``), ties to
    the lane whose first message is the oldest; then every lane again for what the first
    turns left of the batch. The clock itself moves only with what the pulls give
    (``Levels.served``)."""
    virtual = clock.virtual if clock is not None else 0.0
    finish = dict(clock.finish) if clock is not None else {}
    counts: dict[Channel, int] = {}

    def start(channel: Channel) -> float:
        return max(virtual, finish.get(kind_lane(channel), 0.0))

    for _ in range(batch):
        channel = min(lanes, key=lambda c: (start(c), lanes[c][0], c))
        tag = start(channel)
        finish[kind_lane(channel)] = tag + 1.0 / lanes[channel][1]
        virtual = max(virtual, tag)
        counts[channel] = counts.get(channel, 0) + 1
    turns = [_Turns(c, n, lanes[c][1]) for c, n in counts.items()]
    # A lane may hold fewer than its turns: the level's lanes are then asked for the rest
    # before any less urgent level is, so a short lane never lets one pass its level.
    return turns + [_Turns(c, batch, lanes[c][1]) for c in sorted(lanes, key=lambda c: start(c))]


def _message_id(subject: str, header: str | None, seq: int, tag: str = "") -> str:
    """A delivery's message id: the ``Wayline-Id`` a fired schedule carries (the uuid hex the
    enqueue chose, which is also its subject's last token unless the message is keyed), else
    the stream sequence. Any client that can publish can set that header: one that is not
    such an id (a stream sequence copied from another message, say) is not honoured, so a
    message published by hand cannot pass for the delivery that owns a running step."""
    if header is None:
        return f"{tag}{seq}"
    token = subject.rsplit(".", 1)[-1]
    if _hex_id(header) and (token == header or token.startswith("k")):
        return header
    log.warning("ignoring the Wayline-Id %r of message %s on %s", header[:64], seq, subject)
    return f"{tag}{seq}"


def _nak(delay_seconds: float) -> bytes:
    """A nak, redelivered after ``delay_seconds``."""
    if delay_seconds <= 0:
        return b"-NAK"
    return b"-NAK " + json.dumps({"delay": int(delay_seconds * 1e9)}).encode()


def _queued(msg: StoredMsg, schedules: str) -> bool:
    """Whether a message stored under an idempotency key is one an enqueue made: the id it
    chose in its headers (``Nats-Msg-Id`` on a message, ``Wayline-Id`` on a schedule and on the
    message the server fires from it), a JSON object for a payload, and on a schedule subject
    its schedule (a plain message there is never delivered). Bytes that merely look like one
    are not told apart: this is what a publish by hand leaves most often."""
    headers = msg.headers
    if not (_hex_id(headers.get("Nats-Msg-Id")) or _hex_id(headers.get(_ID_HEADER))):
        return False
    if msg.subject.startswith(schedules) and "Nats-Schedule" not in headers:
        return False
    try:
        return isinstance(json.loads(msg.data), dict)
    except RecursionError:  # JSON nested past this reader's stack: not judged here
        return msg.data.lstrip()[:1] == b"{"
    except ValueError:
        return False


def _hex_id(value: str | None) -> bool:
    """A message id an enqueue chooses (``uuid.uuid4().hex``)."""
    return value is not None and len(value) == 32 and all(c in "0123456789abcdef" for c in value)
