"""The connection's hot paths without a turn of the event loop each.

nats-py sends a publish from a flusher task of its own (woken at the next turn of the loop),
and hands a subscription's messages to a task of the subscription's own through a queue (woken
at the next turn too). A step on NATS is one acknowledged publish, so each costs a turn per
step, and its CPU. Here:

- :func:`publish` writes the message to the socket at once, after whatever nats-py still
  holds for it (so the order of the connection's messages is kept), when the connection is
  up on TCP (or TLS); otherwise (reconnecting, draining, closed, a websocket) it is nats-py's
  own publish, which buffers, refuses or raises as it always did. The first publish of a turn
  of the loop is written at once, with nothing scheduled; those after it in the same turn are
  written together at the start of the next (one send for many, as nats-py's flusher does),
  and on a connection whose last turn made several, all of the turn's go in that one send;
- :func:`subscribe` hands each message to a plain function from the connection's reader as
  it is read, instead of queueing it for a subscription task. The function must be quick and
  must not raise (what it raises is logged, never let into the reader).

Both use nats-py internals (``_pending``, ``_transport``, a subscription's ``_pending_queue``).
:func:`available` says whether this nats-py has them; without them both take the public
paths (correct, a turn slower). ``tests/nats/test_wire.py`` checks that the installed
nats-py takes the fast paths.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import re
import weakref
from collections.abc import Callable
from typing import Any

log = logging.getLogger("wayline.nats")

_HEADER_NAME = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_NEWLINES = str.maketrans({"\r": " ", "\n": " "})
_SUBJECT_INVALID = re.compile(r"[\s\x00]")


def available(nc: Any) -> bool:
    """This connection's nats-py has what the fast paths use: a fact of the client's class,
    looked at on its first connection and remembered."""
    known = _available.get(type(nc))
    if known is None:
        known = _available[type(nc)] = (
            isinstance(getattr(nc, "_pending", None), list)
            and hasattr(nc, "_pending_data_size")
            and hasattr(nc, "_transport")
            and isinstance(getattr(nc, "stats", None), dict)
        )
    return known


_available: dict[type, bool] = {}


@functools.cache
def _tcp() -> Any:
    """nats-py's TCP (and TLS) transport: one whose write sends. Its websocket transport only
    queues on write and sends on ``drain``, so a publish there is nats-py's own."""
    from nats.aio.transport import TcpTransport

    return TcpTransport


def _header_block(headers: dict[str, str]) -> bytes:
    """As nats-py writes one: names checked, values stripped, CR/LF turned to spaces."""
    import nats.errors

    parts = [b"NATS/1.0\r\n"]
    for name, value in headers.items():
        key = name.strip()
        if not key:
            continue
        if not _HEADER_NAME.fullmatch(key):
            raise nats.errors.BadHeaderError(key)
        parts.append(f"{key}: {value.strip().translate(_NEWLINES)}\r\n".encode())
    parts.append(b"\r\n")
    return b"".join(parts)


async def publish(
    nc: Any,
    subject: str,
    payload: bytes = b"",
    *,
    reply: str = "",
    headers: dict[str, str] | None = None,
) -> None:
    """``nc.publish``, written to the socket now when the connection is up."""
    transport: Any = getattr(nc, "_transport", None)
    if (
        type(transport) is not _tcp()
        or not nc.is_connected
        or nc.is_draining_pubs
        or not available(nc)
        or len(payload) > nc.max_payload
    ):
        await nc.publish(subject, payload, reply=reply, headers=headers)
        return
    import nats.errors

    if not subject or _SUBJECT_INVALID.search(subject) or _SUBJECT_INVALID.search(reply):
        raise nats.errors.BadSubjectError
    if headers is None:
        cmd = f"PUB {subject} {reply} {len(payload)}\r\n".encode() + payload + b"\r\n"
    else:
        block = _header_block(headers)
        size = len(block) + len(payload)
        cmd = f"HPUB {subject} {reply} {len(block)} {size}\r\n".encode() + block + payload
        cmd += b"\r\n"
    nc.stats["out_msgs"] += 1
    nc.stats["out_bytes"] += len(payload)
    pending = nc._pending
    pending.append(cmd)
    made = _this_turn.get(nc)
    if made is None and nc not in _busy and nc not in _unread:
        # A quiet connection: written now, a turn earlier, and nothing scheduled, so a lone
        # publish (a step's append) costs no turn of the loop of its own. Its reply, read
        # before this connection's next publish, says a later turn has come (see _unread).
        _unread.add(nc)
        nc._pending = []
        nc._pending_data_size = 0
        transport.writelines(pending)
        try:
            await transport.drain()  # no turn of the loop unless the buffer is full
        except OSError as err:  # the connection is gone (nats-py's reader may not know
            await nc._process_op_err(err)  # yet): reconnect, as nats-py's flusher does;
            # the publish is lost with the connection, as one nats-py had flushed would be
        return
    if made is None:  # the turn's first publish held back: the turn's send is scheduled
        asyncio.get_running_loop().call_soon(_end_of_turn, nc)
        # The one written at once may be of an earlier turn (nothing answered it), so it is
        # not counted: a lone publish after a one-way one costs one turn, not the next
        # publish's too; a turn of three or more still makes the connection busy.
        made = 0
    _this_turn[nc] = made + 1
    nc._pending_data_size += len(cmd)  # sent with the rest of the turn's, at its end


_this_turn: weakref.WeakKeyDictionary[Any, int] = weakref.WeakKeyDictionary()
"""Publishes made in this turn of the loop, per connection with a send scheduled."""
_unread: weakref.WeakSet[Any] = weakref.WeakSet()
"""Connections with a publish written at once and no message read or end of turn since: a
publish made now may be in the same turn as that one, so it is held back for the turn's send
(one send for the turn's many, as before). Nothing cheap names a turn of the loop; a message
read by the connection's reader (its reply, most often) or a scheduled end of turn proves
that one has passed. A publish whose reply never comes through :func:`subscribe` only costs
the connection's next publish a turn, as every publish cost before."""
_busy: weakref.WeakSet[Any] = weakref.WeakSet()
"""Connections whose last turn made more than one publish: while so, a turn's publishes all
go in one send at its end (as nats-py's flusher sends them), not the first at once and the
rest after: under load one send a turn, not two, for this process and the server."""


def _end_of_turn(nc: Any) -> None:
    """The turn's publishes not written yet, written together (one send)."""
    _unread.discard(nc)
    if _this_turn.pop(nc, 0) > 1:
        _busy.add(nc)
    else:
        _busy.discard(nc)
    pending = nc._pending
    if pending and nc.is_connected and getattr(nc, "_transport", None) is not None:
        nc._pending = []
        nc._pending_data_size = 0
        nc._transport.writelines(pending)
    # else: nats-py writes what it holds once reconnected, or drops it with the connection


class _Handoff:
    """In place of a subscription's message queue: each message goes to ``handler`` as the
    connection's reader puts it there."""

    def __init__(self, sub: Any, handler: Callable[[Any], None]) -> None:
        self._sub = sub
        self._handler = handler

    def put_nowait(self, msg: Any) -> None:
        self._sub._pending_size -= len(msg.data)  # counted by the reader, taken at once
        conn = getattr(self._sub, "_conn", None)
        if conn is not None:  # read in a later turn than any publish it answers
            _unread.discard(conn)
        try:
            self._handler(msg)
        except Exception:
            log.exception("handling a message on %s failed", msg.subject)

    def qsize(self) -> int:
        return 0

    def empty(self) -> bool:
        return True

    def task_done(self) -> None:
        return None

    async def join(self) -> None:
        return None


async def subscribe(nc: Any, subject: str, handler: Callable[[Any], None]) -> Any:
    """A subscription whose messages go to ``handler`` from the connection's reader; its
    ``unsubscribe`` is the subscription's own."""
    if not available(nc):
        return await nc.subscribe(subject, cb=_as_callback(handler))
    sub = await nc.subscribe(subject)  # no callback: nats-py starts no task for it
    queue = getattr(sub, "_pending_queue", None)
    if not isinstance(queue, asyncio.Queue) or not hasattr(sub, "_pending_size"):
        await sub.unsubscribe()
        return await nc.subscribe(subject, cb=_as_callback(handler))
    sub._pending_queue = _Handoff(sub, handler)
    while not queue.empty():  # anything read before the hand-off was in place
        sub._pending_queue.put_nowait(queue.get_nowait())
    return sub


def _as_callback(handler: Callable[[Any], None]) -> Callable[[Any], Any]:
    async def callback(msg: Any) -> None:
        handler(msg)

    return callback
