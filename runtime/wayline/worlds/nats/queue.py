"""The queue on JetStream.

One work-queue stream. A message lives on its own subject ``<prefix>.q.t.<topic>.<mid>``
(``mid`` = a fresh uuid); a delayed one is first a message schedule on
``<prefix>.q.s.<topic>.<mid>`` (``Nats-Schedule: @at …``) whose target is that subject. Each
topic has one durable pull consumer filtered on ``<prefix>.q.t.<topic>.>`` only, so it never
sees (and, acking, never cancels) a pending schedule. ``message_id`` is the stream sequence
(stable across redeliveries); a delayed message's id is its ``Wayline-Id`` header, which the
scheduler copies onto the message it fires. ``attempt`` is the consumer's ``num_delivered``.

Idempotency keys live in a KV bucket, ``key -> intent`` (mid, topic, body, due time, whether it
was published). ``enqueue`` claims the key with ``kv.create`` before publishing, publishes with
``Nats-Msg-Id: mid`` and then marks the claim published. A second enqueue under a held key
answers the id of the key's message while that message (or its schedule) is stored, which is
exactly while it is queued or in flight; a claim whose message is gone after it was published
is stale (acked, release lost) and is taken over; a claim never marked published is completed
by publishing its recorded intent under the same ``Nats-Msg-Id`` (so a claimer that crashed
between claim and publish cannot wedge the key, and one still publishing is deduplicated).
``ack`` and ``dead_letter`` release the key (a CAS delete of the claim naming this message)
after the message is removed. All of it is stored on the server, so it survives restarts.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import time
import uuid
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any

from ..._core.ids import MessageId
from ...errors import WorldError, WorldUnavailableError
from ...telemetry import carry
from ...world import Delivery, entries
from ...world.routing import plain_topic
from .codec import decode_payload, dumps, parse_stamp, rfc3339, wrap
from .direct import StoredMsg, connected, direct_batch
from .names import Names, consumer_name, kv_key

log = logging.getLogger("wayline.worlds.nats")

_KEY_HEADER = "Wayline-Key"
_ID_HEADER = "Wayline-Id"
_MAX_ACK_PENDING = 20_000


@dataclass(slots=True)
class _Held:
    """A delivery's handle: the message, and until when (monotonic) this process holds it."""

    msg: Any
    fresh_until: float
    settled: bool = False
    handbacks: int = 0
    """Graceful hand-backs of this message before this delivery (not counted as attempts)."""
    epoch: int = 0
    """The connection it was received on (``Queue.lost_connection`` ends that epoch)."""


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
    ) -> None:
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
        self._consumers: dict[str, str] = {}
        self._consumer_lock = asyncio.Lock()
        self._idem: Any = None

    async def start(self) -> None:
        self._idem = await self._js.key_value(self._names.idem_bucket)

    # consumers ----------------------------------------------------------------------------
    async def _consumer(self, topic: str) -> str:
        name = self._consumers.get(topic)
        if name is not None:
            return name
        from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy

        async with self._consumer_lock:
            name = self._consumers.get(topic)
            if name is not None:
                return name
            name = consumer_name(topic)
            config = ConsumerConfig(
                durable_name=name,
                filter_subject=self._names.target_filter(topic),
                ack_policy=AckPolicy.EXPLICIT,
                deliver_policy=DeliverPolicy.ALL,
                ack_wait=self._visibility,
                max_deliver=-1,  # the runtime keeps its own delivery budget (48)
                max_ack_pending=_MAX_ACK_PENDING,
                num_replicas=self._replicas,
                mem_storage=self._memory or None,
            )
            try:
                await self._js.add_consumer(self._stream, config)
            except Exception as err:
                raise wrap(self._url, f"creating the consumer of topic {topic!r}", err) from err
            self._consumers[topic] = name
            return name

    # enqueue ------------------------------------------------------------------------------
    async def enqueue(
        self,
        topic: str,
        payload: Mapping[str, Any],
        idempotency_key: str | None,
        delay_seconds: float,
    ) -> MessageId:
        body = dumps(carry(payload))
        due = time.time() + delay_seconds if delay_seconds > 0 else None
        mid = uuid.uuid4().hex
        if idempotency_key is None:
            return await self._publish(topic, mid, body, due, None)
        return await self._enqueue_keyed(topic, mid, body, due, kv_key(idempotency_key))

    async def _publish(
        self, topic: str, mid: str, body: bytes, due: float | None, key: str | None
    ) -> MessageId:
        import nats.errors

        headers = {"Nats-Msg-Id": mid}
        if key is not None:
            headers[_KEY_HEADER] = key
        target = self._names.target_subject(topic, mid)
        if due is None:
            subject = target
        else:
            subject = self._names.schedule_subject(topic, mid)
            headers["Nats-Schedule"] = f"@at {rfc3339(due)}"
            headers["Nats-Schedule-Target"] = target
            headers[_ID_HEADER] = mid
        for attempt in range(3):
            try:
                await connected(self._nc, timeout=self._timeout, url=self._url)
                ack = await self._js.publish(subject, body, headers=headers, timeout=self._timeout)
                break
            except (
                nats.errors.TimeoutError,
                nats.errors.ConnectionReconnectingError,
                TimeoutError,
            ) as err:
                # same Nats-Msg-Id: if the first publish landed, this one is deduplicated
                if attempt == 2:
                    raise wrap(self._url, f"enqueueing on topic {topic!r}", err) from err
                await asyncio.sleep(0.05 * (attempt + 1))
            except Exception as err:
                raise wrap(self._url, f"enqueueing on topic {topic!r}", err) from err
        return MessageId(mid if due is not None else str(ack.seq))

    async def _idem_entry(self, key: str) -> tuple[int, dict[str, Any] | None] | None:
        """The key's entry (revision, checked claim); the claim is None when the stored bytes
        are not a claim Wayline wrote, and the next enqueue with the key overwrites them."""
        import nats.js.errors

        bucket = self._names.idem_bucket
        try:
            raw = await self._js.get_msg(f"KV_{bucket}", subject=f"$KV.{bucket}.{key}", direct=True)
        except nats.js.errors.NotFoundError:
            return None
        except Exception as err:
            raise wrap(self._url, "reading an idempotency key", err) from err
        if (raw.headers or {}).get("KV-Operation") in ("DEL", "PURGE") or not raw.data:
            return None
        try:
            held = entries.loads_object(raw.data)
            entries.field(held, "mid", str)
            entries.field(held, "topic", str)
            body = entries.field(held, "body", str)
            base64.b64decode(body, validate=True)
            entries.field(held, "published", bool)
            if held.get("due") is not None:
                entries.field(held, "due", (int, float))
        except (entries.Unreadable, ValueError) as err:
            log.warning(
                "idempotency key %s: its entry is unreadable (%s); it is overwritten", key, err
            )
            return int(raw.seq), None
        return int(raw.seq), held

    async def _stored_id(self, topic: str, mid: str) -> MessageId | None:
        """The id of the key's message if it (or its pending schedule) is still stored."""
        import nats.js.errors

        for subject in (
            self._names.schedule_subject(topic, mid),
            self._names.target_subject(topic, mid),
        ):
            try:
                raw = await self._js.get_msg(self._stream, subject=subject, direct=True)
            except nats.js.errors.NotFoundError:
                continue
            except Exception as err:
                raise wrap(self._url, "checking an idempotency key", err) from err
            return MessageId((raw.headers or {}).get(_ID_HEADER) or str(raw.seq))
        return None

    async def _enqueue_keyed(
        self, topic: str, mid: str, body: bytes, due: float | None, key: str
    ) -> MessageId:
        import nats.js.errors

        intent = {
            "mid": mid,
            "topic": topic,
            "body": base64.b64encode(body).decode(),
            "due": due,
            "published": False,
        }
        for _ in range(10):
            try:
                rev = await self._idem.create(key, dumps(intent))
            except nats.js.errors.KeyWrongLastSequenceError:
                rev = None
            except Exception as err:
                raise wrap(self._url, "claiming an idempotency key", err) from err
            if rev is not None:
                return await self._publish_claim(key, rev, intent)
            entry = await self._idem_entry(key)
            if entry is None:
                continue  # released meanwhile: claim again
            held_rev, held = entry
            stored = None if held is None else await self._stored_id(held["topic"], held["mid"])
            if stored is not None:
                return stored  # its message is queued or in flight: dedupe to it
            if held is not None and not held.get("published"):
                # a claim whose publish may never have happened: finish it for its owner
                return await self._publish_claim(key, held_rev, held)
            # published and gone: acked (or dead-lettered) with the release lost; take over
            try:
                rev = await self._idem.update(key, dumps(intent), last=held_rev)
            except nats.js.errors.KeyWrongLastSequenceError:
                continue
            except Exception as err:
                raise wrap(self._url, "claiming an idempotency key", err) from err
            return await self._publish_claim(key, rev, intent)
        raise WorldUnavailableError(
            f"NATS at {self._url}: idempotency key {key} stayed contended", url=self._url
        )

    async def _publish_claim(self, key: str, rev: int, intent: dict[str, Any]) -> MessageId:
        import nats.js.errors

        body = base64.b64decode(intent["body"])
        due = intent.get("due")
        message_id = await self._publish(str(intent["topic"]), str(intent["mid"]), body, due, key)
        if not intent.get("published"):
            done = dict(intent, published=True, id=message_id)
            try:
                await self._idem.update(key, dumps(done), last=rev)
            except (nats.js.errors.KeyWrongLastSequenceError, nats.js.errors.BadRequestError):
                pass  # someone else marked it (or it was acked and released already)
            except Exception as err:
                raise wrap(self._url, "recording an idempotency key", err) from err
        return message_id

    async def remove_stored(self, seq: int, subject: str, headers: dict[str, str]) -> None:
        """Delete a stored message (retention) and release its idempotency key."""
        import nats.js.errors

        try:
            await self._js.delete_msg(self._stream, seq)
        except nats.js.errors.NotFoundError:
            pass
        except nats.js.errors.BadRequestError as err:
            if "no message found" not in str(err).lower():
                raise wrap(self._url, f"deleting message {seq}", err) from err
        except Exception as err:
            raise wrap(self._url, f"deleting message {seq}", err) from err
        await self._release_key(headers.get(_KEY_HEADER), subject)

    async def _release(self, msg: Any) -> None:
        await self._release_key((msg.headers or {}).get(_KEY_HEADER), msg.subject)

    async def _release_key(self, key: str | None, subject: str) -> None:
        if not key:
            return
        mid = subject.rsplit(".", 1)[-1]
        try:
            entry = await self._idem_entry(key)
            if entry is None:
                return
            rev, held = entry
            if held is not None and held.get("mid") == mid:
                await self._idem.delete(key, last=rev)
        except Exception as err:  # a lost release is repaired by enqueue
            log.warning("releasing idempotency key %s failed: %s", key, err)

    # receive ------------------------------------------------------------------------------
    async def _pull(self, consumer: str, request: dict[str, Any], wait: float) -> list[Any]:
        """One pull request; waits for its end (batch filled or a 404/408 status), so no
        delivery is left behind in an abandoned inbox."""
        inbox = self._nc.new_inbox()
        msgs: list[Any] = []
        done = asyncio.Event()
        batch = int(request["batch"])
        failure: list[str] = []

        async def on_msg(msg: Any) -> None:
            status = (msg.headers or {}).get("Status")
            if status:
                if status not in ("404", "408", "100"):
                    failure.append(status)
                if status != "100":
                    done.set()
                return
            msgs.append(msg)
            if len(msgs) >= batch:
                done.set()

        sub = await self._nc.subscribe(inbox, cb=on_msg)
        try:
            await self._nc.publish(
                f"$JS.API.CONSUMER.MSG.NEXT.{self._stream}.{consumer}",
                json.dumps(request).encode(),
                reply=inbox,
            )
            try:
                await asyncio.wait_for(done.wait(), wait + self._timeout)
            except TimeoutError:
                if not msgs:
                    raise WorldUnavailableError(
                        f"NATS at {self._url}: no answer to a pull on {consumer}", url=self._url
                    ) from None
        finally:
            await sub.unsubscribe()
        if failure and not msgs:
            log.warning("pull on %s answered status %s", consumer, failure)
            if "503" in failure or "409" in failure:  # consumer gone: create it again
                for topic, name in list(self._consumers.items()):
                    if name == consumer:
                        del self._consumers[topic]
        return msgs

    async def receive(self, topic: str, max_messages: int, wait_seconds: float) -> list[Delivery]:
        consumer = await self._consumer(topic)
        batch = max(1, max_messages)
        try:
            await connected(self._nc, timeout=self._timeout, url=self._url)
            sent = time.monotonic()
            msgs = await self._pull(consumer, {"batch": batch, "no_wait": True}, 0.0)
            got = [(msg, sent) for msg in msgs]
            if not msgs and wait_seconds > 0:
                expires = max(int(wait_seconds * 1e9), 1_000_000)
                msgs = await self._pull(consumer, {"batch": 1, "expires": expires}, wait_seconds)
                # delivered at some moment of a long wait: confirm the hold from now
                got = [(msg, await self._hold_from_now(msg)) for msg in msgs]
                if msgs and batch > 1:
                    sent = time.monotonic()
                    more = await self._pull(consumer, {"batch": batch - 1, "no_wait": True}, 0.0)
                    got += [(msg, sent) for msg in more]
        except WorldError:
            raise
        except Exception as err:
            raise wrap(self._url, f"receiving on topic {topic!r}", err) from err
        out = []
        for msg, sent in got:
            md = msg.metadata
            headers = msg.headers or {}
            mid = headers.get(_ID_HEADER) or str(md.sequence.stream)
            raw = bytes(msg.data or b"")
            held = _Held(msg, sent + self._visibility, epoch=self._epoch)
            if md.num_delivered > 1:
                held.handbacks = await self._handbacks(int(md.sequence.stream))
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
                )
            )
        return out

    # Graceful hand-backs: JetStream counts every nak as a delivery, so a hand-back is noted
    # under ``h<stream seq>`` in the idempotency bucket (read only on a redelivery) and
    # subtracted from the attempt; the note goes with the message's ack.
    async def _handbacks(self, seq: int) -> int:
        import nats.js.errors

        try:
            entry = await self._idem.get(f"h{seq}")
        except nats.js.errors.KeyNotFoundError:
            return 0
        except Exception as err:
            log.warning("could not read the hand-backs of message %s: %s", seq, err)
            return 0
        return int(entry.value or b"0")

    async def release(self, delivery: Delivery, delay_seconds: float = 0.0) -> bool:
        held = self._fresh(delivery)
        if held is None:
            return False
        seq = int(held.msg.metadata.sequence.stream)
        try:
            await self._idem.put(f"h{seq}", str(held.handbacks + 1).encode())
        except Exception as err:
            log.warning("could not note the hand-back of message %s: %s", seq, err)
            return await self.retry(delivery, delay_seconds)
        held.handbacks += 1
        return await self._answer(delivery, _nak(delay_seconds), "hand-back")

    async def _hold_from_now(self, msg: Any) -> float:
        """Renew a delivery that arrived after a long wait; when its hold began (``-inf``: it
        is unknown, and the delivery is treated as no longer held)."""
        sent = time.monotonic()
        try:
            await self._nc.request(msg.reply, b"+WPI", timeout=self._timeout)
        except Exception as err:
            log.warning("could not confirm the delivery of %s: %s", msg.reply, err)
            return float("-inf")
        return sent

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
    def lost_connection(self) -> None:
        """Every delivery held so far stops being provably this process's: a server that
        crashed can come back without them and redeliver them to others, while it still
        confirms this process's renewals (measured by ``make soak``: two bodies of one step at
        once after a nats-server SIGKILL). Their renewals answer False from now on, so the
        worker fences them (cuts their bodies off) before any redelivery can run beside them."""
        self._epoch += 1

    def _fresh(self, delivery: Delivery) -> _Held | None:
        held: _Held = delivery.handle
        if (
            held.settled
            or held.epoch != self._epoch
            or time.monotonic() >= held.fresh_until - self._margin
        ):
            return None
        return held

    async def _answer(self, delivery: Delivery, body: bytes, what: str) -> bool:
        """Send one settlement as a request; True once the server confirmed it."""
        import nats.errors

        held = self._fresh(delivery)
        if held is None:
            return False
        sent = time.monotonic()
        try:
            await connected(self._nc, timeout=self._timeout, url=self._url)
            await self._nc.request(held.msg.reply, body, timeout=self._timeout)
        except (nats.errors.TimeoutError, TimeoutError, nats.errors.NoRespondersError) as err:
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
        if not await self._answer(delivery, b"+ACK", "ack"):
            return False
        held: _Held = delivery.handle
        await self._release(held.msg)
        if held.handbacks:
            try:
                await self._idem.delete(f"h{held.msg.metadata.sequence.stream}")
            except Exception as err:  # stream sequences are never reused: a stray note is inert
                log.warning("could not drop the hand-back note of %s: %s", delivery.message_id, err)
        return True

    async def retry(self, delivery: Delivery, delay_seconds: float) -> bool:
        return await self._answer(delivery, _nak(delay_seconds), "retry")

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
        try:
            await self._js.publish(
                self._names.dlq_subject,
                dumps(record),
                headers={"Nats-Msg-Id": f"dl-{self._stream}-{held.msg.metadata.sequence.stream}"},
                timeout=self._timeout,
            )
        except Exception as err:
            raise wrap(self._url, f"dead-lettering message {delivery.message_id}", err) from err
        # set aside but not confirmed removed: a redelivery dedupes its record to this one
        return await self.ack(delivery)

    async def stored(self) -> AsyncIterator[tuple[StoredMsg, dict[str, Any]]]:
        """Every stored message and pending schedule (queued, delayed or in flight), with its
        payload; a payload that is not a JSON object is skipped."""
        start = 1
        while True:
            try:
                msgs, pending = await direct_batch(
                    self._nc,
                    self._stream,
                    {"seq": start, "next_by_subj": self._names.queue_wildcard, "batch": 512},
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


def _nak(delay_seconds: float) -> bytes:
    """A nak, redelivered after ``delay_seconds``."""
    if delay_seconds <= 0:
        return b"-NAK"
    return b"-NAK " + json.dumps({"delay": int(delay_seconds * 1e9)}).encode()
