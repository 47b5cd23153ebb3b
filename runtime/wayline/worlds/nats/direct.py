"""Batch direct get (ADR-31): many stored messages in one round trip, which nats-py lacks.

The server answers a ``$JS.API.DIRECT.GET.<stream>`` request carrying ``batch`` with one
message per stored message and then a status message: 204 EOB at the end, 404 when nothing
matched. The stream needs ``allow_direct``.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from ...errors import WorldError, WorldUnavailableError


class StoredMsg:
    __slots__ = ("data", "headers", "seq", "subject")

    def __init__(self, subject: str, seq: int, data: bytes, headers: dict[str, str]) -> None:
        self.subject = subject
        self.seq = seq
        self.data = data
        self.headers = headers


async def direct_batch(
    nc: Any, stream: str, request: dict[str, Any], *, timeout: float, url: str
) -> tuple[list[StoredMsg], int]:
    """The messages of one batch request and the server's count of matches left after it."""
    inbox = nc.new_inbox()
    out: list[StoredMsg] = []
    done: asyncio.Future[int] = asyncio.get_running_loop().create_future()

    async def on_msg(msg: Any) -> None:
        headers = dict(msg.headers or {})
        status = headers.get("Status")
        if status:
            if done.done():
                return
            if status == "204" or status == "404":
                done.set_result(int(headers.get("Nats-Num-Pending") or 0))
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

    sub = await nc.subscribe(inbox, cb=on_msg)
    try:
        await nc.publish(f"$JS.API.DIRECT.GET.{stream}", json.dumps(request).encode(), reply=inbox)
        try:
            pending = await asyncio.wait_for(done, timeout)
        except TimeoutError as err:
            raise WorldUnavailableError(
                f"NATS at {url}: direct get on {stream} timed out after {timeout:g}s", url=url
            ) from err
    finally:
        await sub.unsubscribe()
    return out, pending


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
