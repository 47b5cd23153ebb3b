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
from typing import Any

from ...errors import WorldError, WorldUnavailableError
from ...ids import MessageId
from ...telemetry import carry
from ...world import Delivery
from .codec import decode_payload, dumps, parse_stamp, rfc3339, wrap
from .direct import StoredMsg, connected, direct_batch
from .names import Names, consumer_name, kv_key

log = logging.getLogger("wayline.worlds.nats")

_KEY_HEADER = "Wayline-Key"
_ID_HEADER = "Wayline-Id"
_MAX_ACK_PENDING = 20_000


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

    async def _idem_entry(self, key: str) -> tuple[int, dict[str, Any]] | None:
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
        return int(raw.seq), json.loads(raw.data)

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
            stored = await self._stored_id(str(held["topic"]), str(held["mid"]))
            if stored is not None:
                return stored  # its message is queued or in flight: dedupe to it
            if not held.get("published"):
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
            if held.get("mid") == mid:
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
            msgs = await self._pull(consumer, {"batch": batch, "no_wait": True}, 0.0)
            if not msgs and wait_seconds > 0:
                expires = max(int(wait_seconds * 1e9), 1_000_000)
                msgs = await self._pull(consumer, {"batch": 1, "expires": expires}, wait_seconds)
                if msgs and batch > 1:
                    msgs += await self._pull(consumer, {"batch": batch - 1, "no_wait": True}, 0.0)
        except WorldError:
            raise
        except Exception as err:
            raise wrap(self._url, f"receiving on topic {topic!r}", err) from err
        out = []
        for msg in msgs:
            md = msg.metadata
            headers = msg.headers or {}
            mid = headers.get(_ID_HEADER) or str(md.sequence.stream)
            raw = bytes(msg.data or b"")
            # The stream stamps a message when it is stored, which for a delayed one is when
            # its schedule fires: due then, for a first delivery.
            stamp = getattr(md, "timestamp", None)
            due = stamp.timestamp() if stamp is not None and md.num_delivered == 1 else None
            out.append(
                Delivery(
                    topic, MessageId(mid), int(md.num_delivered), decode_payload(raw), raw, msg, due
                )
            )
        return out

    # settle -------------------------------------------------------------------------------
    async def ack(self, delivery: Delivery) -> None:
        import nats.errors

        msg = delivery.handle
        try:
            await self._remove(delivery)
        except nats.errors.MsgAlreadyAckdError:
            return
        await self._release(msg)

    async def _remove(self, delivery: Delivery) -> None:
        """Ack; if the server does not confirm (after a crash it may have forgotten this
        delivery, and then it never answers its ack), delete the message from the stream,
        which in a work queue is what an ack does."""
        import nats.errors
        import nats.js.errors

        msg = delivery.handle
        try:
            await connected(self._nc, timeout=self._timeout, url=self._url)
            await msg.ack_sync(timeout=self._timeout)
            return
        except nats.errors.MsgAlreadyAckdError:
            raise
        except (nats.errors.TimeoutError, TimeoutError) as err:
            log.warning("ack of message %s unconfirmed (%s); deleting it", delivery.message_id, err)
        except Exception as err:
            raise wrap(self._url, f"acking message {delivery.message_id}", err) from err
        seq = int(msg.metadata.sequence.stream)
        try:
            await self._js.delete_msg(self._stream, seq)
        except nats.js.errors.NotFoundError:
            pass  # already gone: the ack did land
        except nats.js.errors.BadRequestError as err:
            if "no message found" not in str(err).lower():
                raise wrap(self._url, f"removing message {delivery.message_id}", err) from err
        except Exception as err:
            raise wrap(self._url, f"removing message {delivery.message_id}", err) from err
        msg._ackd = True  # nats-py's own flag: this delivery is settled

    async def retry(self, delivery: Delivery, delay_seconds: float) -> None:
        import nats.errors

        try:
            await delivery.handle.nak(delay=delay_seconds if delay_seconds > 0 else None)
        except nats.errors.MsgAlreadyAckdError:
            return
        except Exception as err:
            raise wrap(self._url, f"retrying message {delivery.message_id}", err) from err

    async def renew(self, delivery: Delivery) -> None:
        try:
            await delivery.handle.in_progress()
        except Exception as err:
            raise wrap(self._url, f"renewing message {delivery.message_id}", err) from err

    async def dead_letter(self, delivery: Delivery, reason: str) -> None:
        import nats.errors

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
                headers={
                    "Nats-Msg-Id": f"dl-{self._stream}-{delivery.handle.metadata.sequence.stream}"
                },
                timeout=self._timeout,
            )
        except Exception as err:
            raise wrap(self._url, f"dead-lettering message {delivery.message_id}", err) from err
        try:
            await self._remove(delivery)
        except nats.errors.MsgAlreadyAckdError:
            pass
        await self._release(delivery.handle)

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
                    payload = json.loads(msg.data)
                except (ValueError, UnicodeDecodeError):
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
            record = json.loads(msg.data)
            record["createdAt"] = parse_stamp(msg.headers["Nats-Time-Stamp"])
            out.append(record)
        return out[:limit]
