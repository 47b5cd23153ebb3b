"""Batch direct get (ADR-31): many stored messages in one round trip, which nats-py lacks.

The server answers a ``$JS.API.DIRECT.GET.<stream>`` request carrying ``batch`` with one
message per stored message and then a status message: 204 EOB at the end, 404 when nothing
matched. The stream needs ``allow_direct``.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
import uuid
import weakref
from collections.abc import Awaitable, Callable
from typing import Any, NamedTuple

from ..._core import clock
from ...errors import WorldError, WorldStorageFullError, WorldUnavailableError
from ...world import patience
from . import wire
from .codec import is_wrong_last_sequence, parse_stamp, wrap


class StoredMsg:
    __slots__ = ("data", "headers", "seq", "subject")

    def __init__(self, subject: str, seq: int, data: bytes, headers: dict[str, str]) -> None:
        self.subject = subject
        self.seq = seq
        self.data = data
        self.headers = headers


class Inbox:
    """One wildcard subscription that takes the replies of many requests, each request on
    its own subject below it: no SUB/UNSUB (and no nats-py task) per request, each reply
    handed over by the connection's reader (:func:`wire.subscribe`). One per connection (see
    :func:`inbox`), restored with it on reconnect like any subscription."""

    def __init__(self, nc: Any) -> None:
        self._nc = nc
        self._prefix = nc.new_inbox()
        self._handlers: dict[str, Callable[[Any], None]] = {}
        self._count = 0
        self._sub: Any = None
        self._lock = asyncio.Lock()
        self.waiting: dict[str, asyncio.Future[Any]] = {}
        """The requests waiting for their reply (acknowledged publishes and direct gets),
        failed at once when the connection is lost (:func:`lost_replies`)."""

    async def open(self, handler: Callable[[Any], None]) -> str:
        """A fresh reply subject whose messages go to ``handler`` until :meth:`close`."""
        if self._sub is None:
            async with self._lock:
                if self._sub is None:
                    self._sub = await wire.subscribe(self._nc, f"{self._prefix}.*", self._on_msg)
        self._count += 1
        subject = f"{self._prefix}.{self._count}"
        self._handlers[subject] = handler
        return subject

    def close(self, subject: str) -> None:
        self._handlers.pop(subject, None)
        self.waiting.pop(subject, None)

    def _on_msg(self, msg: Any) -> None:
        handler = self._handlers.get(msg.subject)
        if handler is not None:
            handler(msg)


_inboxes: weakref.WeakKeyDictionary[Any, Inbox] = weakref.WeakKeyDictionary()


def lost_replies(nc: Any, error: Callable[[], BaseException]) -> None:
    """The connection was lost: the replies of the requests in flight on its inbox are lost
    with it. Each fails at once with ``error()`` instead of waiting out its timeout: an
    acknowledged publish is retried under the same ``Nats-Msg-Id`` once reconnected, a direct
    get fails as unavailable (what its timeout would have raised, later)."""
    box = _inboxes.get(nc)
    if box is None:
        return
    for answer in list(box.waiting.values()):
        if not answer.done():
            answer.set_exception(error())
            answer.exception()  # retrieved, should its waiter be gone


def inbox(nc: Any) -> Inbox:
    """The connection's shared reply inbox (state of that connection, never of the process:
    two worlds on two connections never share one)."""
    box = _inboxes.get(nc)
    if box is None:
        box = _inboxes[nc] = Inbox(nc)
    return box


class TooManyResults(WorldError):
    """A direct get over many subjects (``multi_last``) matched more subjects than the server
    answers at once (status 413): so something is stored on them."""


async def direct_batch(
    nc: Any, stream: str, request: dict[str, Any], *, timeout: float, url: str
) -> tuple[list[StoredMsg], int]:
    """The messages of one batch request and the server's count of matches left after it."""
    out: list[StoredMsg] = []
    done: asyncio.Future[int] = asyncio.get_running_loop().create_future()

    def on_msg(msg: Any) -> None:
        headers = dict(msg.headers or {})
        # A stored message may carry a ``Status`` header of its own (anyone who can publish
        # into a stream can store one): only an answer without ``Nats-Sequence`` is the
        # server's status. The server adds that header to every stored message it returns.
        status = None if "Nats-Sequence" in headers else headers.get("Status")
        if status:
            if done.done():
                return
            if status == "204" or status == "404":
                done.set_result(int(headers.get("Nats-Num-Pending") or 0))
            elif status == "413":  # a multi_last request that matches over the server's limit
                done.set_exception(
                    TooManyResults(f"NATS at {url}: direct get on {stream} matched too many")
                )
            elif status == "503":
                done.set_exception(
                    WorldUnavailableError(f"NATS at {url}: no JetStream answer for {stream}")
                )
            else:
                desc = next((v for k, v in headers.items() if str(k) == "Description"), "")
                done.set_exception(WorldError(f"NATS at {url}: direct get {status} {desc}"))
            return
        out.append(
            StoredMsg(
                headers.get("Nats-Subject", ""),
                int(headers.get("Nats-Sequence", "0")),
                msg.data or b"",
                headers,
            )
        )

    import nats.errors

    box = inbox(nc)
    reply = await box.open(on_msg)
    box.waiting[reply] = done
    try:
        await wire.publish(
            nc, f"$JS.API.DIRECT.GET.{stream}", json.dumps(request).encode(), reply=reply
        )
        try:
            pending = await asyncio.wait_for(done, timeout)
        except TimeoutError as err:
            raise WorldUnavailableError(
                f"NATS at {url}: direct get on {stream} timed out after {timeout:g}s", url=url
            ) from err
        except (nats.errors.ConnectionReconnectingError, nats.errors.ConnectionClosedError) as err:
            raise WorldUnavailableError(
                f"NATS at {url}: the connection was lost during a direct get on {stream}",
                url=url,
            ) from err
    finally:
        box.close(reply)
    return out, pending


def _no_answer(fut: asyncio.Future[Any]) -> None:
    if not fut.done():
        fut.set_result(None)


async def publish_acked(
    nc: Any, subject: str, payload: bytes, headers: dict[str, str], timeout: float
) -> tuple[int, bool]:
    """``js.publish`` on the shared inbox: the stored message's stream sequence and whether
    the server deduplicated it. Raises what ``js.publish`` raises (nats-py's ``TimeoutError``,
    ``NoRespondersError``, the ``APIError`` of the server's answer)."""

    async def send(reply: str) -> None:
        await wire.publish(nc, subject, payload, reply=reply, headers=headers)

    resp = await _acked(nc, send, timeout)
    return int(resp["seq"]), bool(resp.get("duplicate"))


async def publish_batch(
    nc: Any, messages: list[tuple[str, bytes, dict[str, str]]], timeout: float
) -> int:
    """The messages as one JetStream atomic batch (``allow_atomic`` streams, nats-server
    >= 2.12): all stored, with consecutive stream sequences in the given order, or none. The
    last one's stream sequence; raises what :func:`publish_acked` raises (the server refuses
    the whole batch with one error, e.g. 10071 when any message's expected last subject
    sequence does not hold, without saying which). Only the commit asks for an answer: the
    server answers the others only when it drops the batch, which the commit's answer then
    says too."""
    import nats.js.errors

    batch_id = uuid.uuid4().hex
    last = len(messages)

    async def send(reply: str) -> None:
        for i, (subject, payload, headers) in enumerate(messages, 1):
            marked = {**headers, "Nats-Batch-Id": batch_id, "Nats-Batch-Sequence": str(i)}
            if i == last:
                marked["Nats-Batch-Commit"] = "1"
            await wire.publish(
                nc, subject, payload, reply=reply if i == last else "", headers=marked
            )

    resp = await _acked(nc, send, timeout)
    if int(resp.get("count", -1)) != last:
        raise nats.js.errors.APIError(description=f"batch stored {resp.get('count')} of {last}")
    return int(resp["seq"])


async def _acked(nc: Any, send: Callable[[str], Awaitable[None]], timeout: float) -> dict[str, Any]:
    """The JetStream answer to what ``send`` publishes asking for it on the reply subject it
    is given (on the shared inbox), decoded; raises nats-py's ``TimeoutError`` or
    ``NoRespondersError``, or the ``APIError`` of an error answer."""
    import nats.errors
    import nats.js.errors

    loop = asyncio.get_running_loop()
    answer: asyncio.Future[Any] = loop.create_future()
    box = inbox(nc)

    def on_answer(msg: Any) -> None:
        if not answer.done():
            answer.set_result(msg)

    reply = await box.open(on_answer)
    box.waiting[reply] = answer
    timer = loop.call_later(timeout, _no_answer, answer)
    try:
        await send(reply)
        msg = await answer
    finally:
        timer.cancel()
        box.close(reply)
    if msg is None:
        raise nats.errors.TimeoutError
    if (msg.headers or {}).get("Status") == "503":
        raise nats.errors.NoRespondersError
    resp: dict[str, Any] = json.loads(msg.data)
    if "error" in resp:
        raise nats.js.errors.APIError.from_error(resp["error"])
    return resp


async def delete_acked(nc: Any, stream: str, seq: int, *, timeout: float) -> bool:
    """``$JS.API.STREAM.MSG.DELETE`` of one message on the shared inbox (a request through
    nats-py's ``delete_msg`` costs the event loop several more turns): True when it was
    stored and is deleted, False when no message has that sequence (err_code 10057). The
    message's bytes are dropped, not overwritten (``no_erase``). Raises what ``_acked``
    raises otherwise."""
    import nats.js.errors

    body = json.dumps({"seq": seq, "no_erase": True}).encode()

    async def send(reply: str) -> None:
        await wire.publish(nc, f"$JS.API.STREAM.MSG.DELETE.{stream}", body, reply=reply)

    try:
        resp = await _acked(nc, send, timeout)
    except nats.js.errors.APIError as err:
        if err.err_code == 10057:
            return False
        raise
    return bool(resp.get("success"))


class Acked(NamedTuple):
    """A stored publish: its stream sequence, whether the server deduplicated it, and the
    wall clock around the answered attempt (``first``: no earlier attempt may have stored it)."""

    seq: int
    duplicate: bool
    sent: float
    acked: float
    first: bool


PUBLISH_ATTEMPTS = 3
"""Attempts of a publish whose caller holds nothing (``patience.remaining()`` is 0)."""

_PAUSE_CAP = 0.5
"""The longest pause between attempts: a stream elects a leader in seconds (about 2 s on
pods, 5 s with three nats-servers on one loaded machine), and the first attempt after it
should not wait much longer."""

_SHORTEST_WAIT = 0.5
"""Seconds: a further attempt that could wait no longer than this for its answer within the
caller's hold is not made (a loaded server answers a publish in milliseconds)."""


async def publish_retried(
    nc: Any,
    subject: str,
    payload: bytes,
    headers: dict[str, str],
    *,
    timeout: float,
    url: str,
    doing: str,
) -> Acked | None:
    """:func:`publish_acked`, asked again while its answer may be lost (a timeout, the
    connection lost, no stream leader this instant: a restart, an election), each time under
    the same ``Nats-Msg-Id`` and headers, so a publish that landed is deduplicated or,
    conditional, refused. A caller that holds a delivery (``patience``) has it asked again
    past the usual attempts for as long as each further attempt ends within its hold; others
    fail after :data:`PUBLISH_ATTEMPTS`. None when the server refused the expected last
    sequence (10071): what that means is the caller's. Every other failure is a
    :class:`WorldError` naming ``doing`` (unavailable when it may pass)."""
    import nats.errors
    import nats.js.errors

    retried = (
        nats.errors.TimeoutError,
        nats.errors.ConnectionReconnectingError,
        nats.errors.NoRespondersError,
        nats.js.errors.ServiceUnavailableError,
        TimeoutError,
    )
    attempt, wait = 0, timeout
    while True:
        try:
            await connected(nc, timeout=wait, url=url)
            sent = clock.now()
            seq, duplicate = await publish_acked(nc, subject, payload, headers, wait)
            return Acked(seq, duplicate, sent, clock.now(), attempt == 0)
        except nats.js.errors.BadRequestError as err:
            if is_wrong_last_sequence(err):
                return None
            raise wrap(url, doing, err) from err
        except retried as err:
            failure: WorldError = wrap(url, doing, err)
            failure.__cause__ = err
            if isinstance(failure, WorldStorageFullError):
                # A full store is no election: asking again at once only fills the hold. The
                # worker handles the delivery again in place, backing off, until there is room.
                raise failure from err
        except WorldUnavailableError as err:  # not connected in time: asked again only
            failure = err  # within a hold (a wait for the connection is long already)
            attempt = max(attempt, PUBLISH_ATTEMPTS - 1)
        except WorldError:
            raise
        except Exception as err:
            raise wrap(url, doing, err) from err
        attempt += 1
        pause = min(_PAUSE_CAP, 0.05 * attempt)
        if attempt >= PUBLISH_ATTEMPTS:
            # a further attempt may wait for a connection, then for its answer: both end
            # within the hold, or it is not made
            wait = min(timeout, (patience.remaining() - pause) / 2)
            if wait < _SHORTEST_WAIT:
                raise failure
        await asyncio.sleep(pause)


async def _leader_get(
    nc: Any, stream: str, request: dict[str, Any], *, timeout: float, url: str, what: str
) -> dict[str, Any] | None:
    """One stored message as the stream's leader has it (``$JS.API.STREAM.MSG.GET``, not a
    direct get: in a cluster only the leader answers it, and the leader has applied every write
    it acked, where a direct get may be answered by a replica that has not). None: no such
    message."""
    data = json.dumps(request).encode()
    resp = await nc.request(f"$JS.API.STREAM.MSG.GET.{stream}", data, timeout=timeout)
    if (resp.headers or {}).get("Status") == "503":
        raise WorldUnavailableError(f"NATS at {url}: no JetStream answer for {stream}", url=url)
    answer = json.loads(resp.data)
    error = answer.get("error")
    if error is None:
        return dict(answer["message"])
    if error.get("err_code") == 10037:  # no message found
        return None
    kind = WorldUnavailableError if error.get("code") == 503 else WorldError
    raise kind(f"NATS at {url}: reading {what} from the leader of {stream}: {error}")


async def leader_first(
    nc: Any, stream: str, subject: str, *, timeout: float, url: str
) -> int | None:
    """The stream sequence of the first message stored on ``subject``, or None, as the stream
    leader has it (``_leader_get``)."""
    request = {"seq": 1, "next_by_subj": subject}
    found = await _leader_get(nc, stream, request, timeout=timeout, url=url, what=subject)
    return None if found is None else int(found["seq"])


async def leader_stamp(nc: Any, stream: str, seq: int, *, timeout: float, url: str) -> float:
    """The server's timestamp of stored message ``seq``, as the stream's leader has it
    (``_leader_get``: a direct get might say it has no such message yet)."""
    what = f"message {seq}"
    found = await _leader_get(nc, stream, {"seq": seq}, timeout=timeout, url=url, what=what)
    if found is None:
        raise WorldError(f"NATS at {url}: the leader of {stream} has no {what}")
    return parse_stamp(str(found["time"]))


async def read_subject(
    nc: Any, stream: str, subject: str, after: int, *, timeout: float, url: str, batch: int = 512
) -> list[StoredMsg]:
    """Every stored message on ``subject`` with stream sequence > ``after``, in order."""
    out: list[StoredMsg] = []
    start = after + 1
    while True:
        msgs, pending = await direct_batch(
            nc,
            stream,
            {"seq": start, "next_by_subj": subject, "batch": batch},
            timeout=timeout,
            url=url,
        )
        out.extend(msgs)
        if not msgs or pending <= 0:
            return out
        start = msgs[-1].seq + 1


def _parsed_headers(hdrs: str | None) -> dict[str, str]:
    """The headers of a stored message as ``STREAM.MSG.GET`` gives them (base64 of the
    ``NATS/1.0`` header block)."""
    if not hdrs:
        return {}
    try:
        block = base64.b64decode(hdrs).decode("utf-8", "replace")
    except (binascii.Error, ValueError):
        return {}
    out: dict[str, str] = {}
    for line in block.split("\r\n")[1:]:
        key, sep, value = line.partition(":")
        if sep and key.strip():
            out[key.strip()] = value.strip()
    return out


async def leader_read_subject(
    nc: Any, stream: str, subject: str, after: int, *, timeout: float, url: str
) -> list[StoredMsg]:
    """:func:`read_subject` as the stream's leader has it (``_leader_get``, one request per
    message): every acknowledged write is there, where a direct get may be answered by a
    replica that has not caught up (after a partition or a restart). The headers carry
    ``Nats-Time-Stamp`` as a direct get's do."""
    out: list[StoredMsg] = []
    start = after + 1
    while True:
        request = {"seq": start, "next_by_subj": subject}
        found = await _leader_get(nc, stream, request, timeout=timeout, url=url, what=subject)
        if found is None:
            return out
        headers = _parsed_headers(found.get("hdrs"))
        seq = int(found["seq"])
        headers.update(
            {
                "Nats-Time-Stamp": str(found.get("time") or ""),
                "Nats-Sequence": str(seq),
                "Nats-Subject": str(found.get("subject") or subject),
            }
        )
        data = base64.b64decode(found.get("data") or "")
        out.append(StoredMsg(headers["Nats-Subject"], seq, data, headers))
        start = seq + 1


async def last_by_subject(
    nc: Any, stream: str, wildcard: str, *, timeout: float, url: str
) -> list[StoredMsg]:
    """The newest stored message of each subject under ``wildcard``: a listing of a KV or
    object store bucket that cannot miss a key rewritten while it reads, as nats-py's watcher
    listings (``KeyValue.keys``, ``ObjectStore.list``) can. Read in stream order, a rewrite
    stores the key's new message past the one it removes, so the read meets one of the two."""
    newest = {
        m.subject: m for m in await read_subject(nc, stream, wildcard, 0, timeout=timeout, url=url)
    }
    return list(newest.values())


async def kv_last(nc: Any, bucket: str, key: str, *, timeout: float, url: str) -> StoredMsg | None:
    """A KV key's newest stored message (a value or a delete marker) by a direct get that
    applies :func:`direct_batch`'s ``Nats-Sequence`` rule: nats-py's ``KeyValue.get`` (and
    ``create`` over an existing key) takes an empty value stored with a ``Status`` header of
    its own for the server's status ("not found", or an error)."""
    request = {"multi_last": [f"$KV.{bucket}.{key}"], "batch": 1}
    found, _ = await direct_batch(nc, f"KV_{bucket}", request, timeout=timeout, url=url)
    return found[-1] if found else None


async def kv_read(js: Any, bucket: str, key: str, *, url: str, what: str) -> StoredMsg | None:
    """:func:`kv_last` for a store of the world, on its JetStream context's client and
    request timeout: a KV key's newest stored message (a value or a delete marker), not
    nats-py's ``get``, which takes a forged ``Status`` header for the server's. A wayline
    error passes as it is; a client library's error is wrapped, ``what`` saying what was
    read."""
    try:
        return await kv_last(js._nc, bucket, key, timeout=js._timeout, url=url)
    except WorldError:
        raise
    except Exception as err:
        raise wrap(url, what, err) from err


def kv_value(found: StoredMsg | None) -> tuple[int, bytes | None]:
    """The revision to write over and the value of :func:`kv_last`'s answer: (0, None) for no
    entry, (its revision, None) for a delete marker."""
    if found is None:
        return 0, None
    if found.headers.get("KV-Operation") in ("DEL", "PURGE"):
        return found.seq, None
    return found.seq, found.data


async def connected(nc: Any, *, timeout: float, url: str) -> None:
    """Wait out a reconnect before a request: one buffered while reconnecting can lose its
    reply (the reply subscription is restored after the buffer is flushed)."""
    if nc.is_connected:
        return
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not nc.is_connected:
        if nc.is_closed or loop.time() > deadline:
            raise WorldUnavailableError(f"NATS at {url} is not connected", url=url)
        await asyncio.sleep(0.02)


async def last_seq(js: Any, stream: str, url: str, what: str) -> int:
    """The stream's last sequence (0: nothing stored yet), from one stream info."""
    try:
        info = await js.stream_info(stream)
    except Exception as err:
        raise wrap(url, what, err) from err
    return int(info.state.last_seq or 0)
