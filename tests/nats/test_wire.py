"""The connection's fast paths (``worlds/nats/wire.py``) against a real nats-server: a
publish written at once keeps the connection's order and nats-py's checks, a subscription's
messages reach their handler from the reader, and both still work across a restart."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests.nats_fixtures import NatsServer, require_nats
from tests.servers import free_port
from wayline.worlds.nats import wire

nats = pytest.importorskip("nats")


async def _connect(server: NatsServer, **kw: Any) -> Any:
    return await nats.connect(server.url, **kw)


@contextlib.asynccontextmanager
async def _writer_and_reader(server: NatsServer) -> AsyncIterator[tuple[Any, Any]]:
    nc, reader = await _connect(server), await _connect(server)
    try:
        yield nc, reader
    finally:
        await nc.close()
        await reader.close()


async def _collect(nc: Any, subject: str) -> tuple[Any, list[Any]]:
    got: list[Any] = []
    sub = await nc.subscribe(subject, cb=_append_to(got))
    await _subscribed(nc)
    return sub, got


async def _subscribed(nc: Any) -> None:
    """The server has the connection's subscriptions: nats-py's flusher writes a SUB at the
    next turn, and ``flush`` writes its PING to the socket at once, so a PONG right after
    ``subscribe`` can come back before the SUB was even sent (and another connection's
    publishes can reach the server first)."""
    await asyncio.sleep(0)
    await nc.flush()


def _append_to(got: list[Any]) -> Any:
    async def cb(msg: Any) -> None:
        got.append(msg)

    return cb


async def _until(check: Any, timeout: float = 5.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not check():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("not in time")
        await asyncio.sleep(0.01)


async def test_the_installed_nats_py_takes_the_fast_paths(nats_server: NatsServer) -> None:
    nc = await _connect(nats_server)
    try:
        assert wire.available(nc)
        kicks = nc._flush_queue.qsize()
        await wire.publish(nc, "wire.fast", b"x")
        # written now: nothing left for nats-py's flusher, and the flusher not woken for it
        assert nc._pending == [] and nc._pending_data_size == 0
        assert nc._flush_queue.qsize() == kicks
        sub = await wire.subscribe(nc, "wire.fast.sub", lambda msg: None)
        assert getattr(sub, "_wait_for_msgs_task", None) is None  # no task of its own
        await sub.unsubscribe()
    finally:
        await nc.close()


async def test_a_direct_publish_keeps_the_connections_order_and_headers(
    nats_server: NatsServer,
) -> None:
    async with _writer_and_reader(nats_server) as (nc, reader):
        _, got = await _collect(reader, "wire.order")
        for i in range(200):  # nats-py's own publishes still wait in its buffer: ours after
            if i % 2:
                await wire.publish(nc, "wire.order", str(i).encode(), headers={"N": str(i)})
            else:
                await nc.publish("wire.order", str(i).encode())
        await _until(lambda: len(got) == 200)
        assert [int(m.data) for m in got] == list(range(200))
        assert all((m.headers or {}).get("N") == m.data.decode() for m in got[1::2])
        # a value cannot carry a line of its own (as nats-py: CR and LF become spaces)
        await wire.publish(
            nc, "wire.order", b"h", headers={"A": "1\r\nInjected: yes", "B": " padded "}
        )
        await _until(lambda: len(got) == 201)
        assert got[-1].headers == {"A": "1  Injected: yes", "B": "padded"}


async def test_publishes_of_one_turn_after_the_first_go_out_together(
    nats_server: NatsServer,
) -> None:
    async with _writer_and_reader(nats_server) as (nc, reader):
        _, got = await _collect(reader, "wire.turn")
        await wire.publish(nc, "wire.turn", b"0")
        assert nc._pending == []  # the turn's first: written at once
        for i in range(1, 50):
            await wire.publish(nc, "wire.turn", str(i).encode())
        assert len(nc._pending) == 49  # the rest of the turn's: held for one send ...
        await asyncio.sleep(0)
        assert nc._pending == [] and nc._pending_data_size == 0  # ... at the next turn
        await _until(lambda: len(got) == 50)
        # a busy connection (its last turn made several): the turn's first waits for the
        # rest, all in one send at its end
        await wire.publish(nc, "wire.turn", b"50")
        assert len(nc._pending) == 1
        await asyncio.sleep(0)
        assert nc._pending == []
        # that turn made one: quiet again, the next turn's first is written at once
        await wire.publish(nc, "wire.turn", b"51")
        assert nc._pending == []
        await _until(lambda: len(got) == 52)
        assert [int(m.data) for m in got] == list(range(52))


def _scheduled_sends() -> int:
    """The connection's sends scheduled for the loop's next turn (each costs a turn when
    nothing else is ready)."""
    ready = asyncio.get_running_loop()._ready  # type: ignore[attr-defined]
    return sum(getattr(h, "_callback", None) is wire._end_of_turn for h in ready)


async def test_a_lone_publish_and_its_reply_cost_no_turn_of_the_loop_of_their_own(
    nats_server: NatsServer,
) -> None:
    """A step on NATS is one publish and its reply: the publish is written at once and no
    end of turn is scheduled for it, so the loop waits for the reply in the very next turn."""
    async with _writer_and_reader(nats_server) as (nc, responder):

        async def echo(msg: Any) -> None:
            await msg.respond(msg.data)

        await responder.subscribe("wire.lone.ask", cb=echo)
        await _subscribed(responder)
        replies: asyncio.Queue[Any] = asyncio.Queue()
        await wire.subscribe(nc, "wire.lone.reply", replies.put_nowait)
        await _subscribed(nc)
        for i in range(20):
            await wire.publish(nc, "wire.lone.ask", str(i).encode(), reply="wire.lone.reply")
            assert nc._pending == []  # written at once
            assert _scheduled_sends() == 0  # and nothing scheduled for it
            assert (await asyncio.wait_for(replies.get(), 5)).data == str(i).encode()
        # a publish that nothing answers: the next one may be in the same turn as far as the
        # connection can tell, so it waits for the turn's send, and is sent, in order
        _, got = await _collect(responder, "wire.lone.oneway")
        await wire.publish(nc, "wire.lone.oneway", b"0")
        await asyncio.sleep(0)
        await wire.publish(nc, "wire.lone.oneway", b"1")
        assert len(nc._pending) == 1 and _scheduled_sends() == 1
        await asyncio.sleep(0)
        assert nc._pending == []
        await wire.publish(nc, "wire.lone.oneway", b"2")  # quiet again after that turn's send
        assert nc._pending == [] and _scheduled_sends() == 0
        await _until(lambda: len(got) == 3)
        assert [m.data for m in got] == [b"0", b"1", b"2"]


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
async def test_a_websocket_connection_publishes_as_nats_py_does(tmp_path: Path) -> None:
    """nats-py's websocket transport sends only on drain: a publish there is nats-py's own
    (written and sent by its flusher), never left in the transport."""
    pytest.importorskip("aiohttp")  # nats-py's websocket transport needs it (kopf brings it)
    port = free_port()
    conf = tmp_path / "ws.conf"
    conf.write_text(f'websocket {{\n  listen: "127.0.0.1:{port}"\n  no_tls: true\n}}\n')
    server = NatsServer(require_nats(), tmp_path, jetstream=False, args=["-c", str(conf)])
    server.start()
    try:
        reader = await _connect(server)
        nc = await nats.connect(f"ws://127.0.0.1:{port}", max_reconnect_attempts=1)
        try:
            _, got = await _collect(reader, "wire.ws")
            for data in (b"first", b"second"):  # one turn: the second is not the first
                await wire.publish(nc, "wire.ws", data)
            await asyncio.sleep(1.5)  # no later publish, no drain: only what was sent
            assert [m.data for m in got] == [b"first", b"second"]
        finally:
            await nc.close()
            await reader.close()
    finally:
        server.stop()


async def test_a_direct_publish_refuses_what_nats_py_refuses(nats_server: NatsServer) -> None:
    import nats.errors

    nc = await _connect(nats_server)
    try:
        for subject in ("", "a b", "a\r\nPUB x 1"):
            with pytest.raises(nats.errors.BadSubjectError):
                await wire.publish(nc, subject, b"x")
        with pytest.raises(nats.errors.BadSubjectError):
            await wire.publish(nc, "ok", b"x", reply="r\r\nUNSUB 1")
        with pytest.raises(nats.errors.BadHeaderError):
            await wire.publish(nc, "ok", b"x", headers={"bad name": "v"})
        with pytest.raises(nats.errors.MaxPayloadError):
            await wire.publish(nc, "ok", b"x" * (nc.max_payload + 1))
        assert nc._pending == []  # nothing half written
        await nc.close()
        with pytest.raises(nats.errors.ConnectionClosedError):
            await wire.publish(nc, "ok", b"x")
    finally:
        await nc.close()


async def test_a_handed_off_subscription_takes_every_message_in_order(
    nats_server: NatsServer, caplog: pytest.LogCaptureFixture
) -> None:
    nc, writer = await _connect(nats_server), await _connect(nats_server)
    errors: list[Exception] = []

    async def on_error(err: Exception) -> None:
        errors.append(err)

    got: list[bytes] = []

    def handler(msg: Any) -> None:
        if msg.data == b"boom":
            raise ValueError("the handler's own failure")
        got.append(msg.data)

    try:
        nc._error_cb = on_error
        sub = await wire.subscribe(nc, "wire.sub", handler)
        await _subscribed(nc)
        # more bytes than a subscription may hold pending (64 MiB by default): the hand-off
        # holds none, so none is dropped as a slow consumer's
        big = b"y" * (nc.max_payload - 1024)
        count = (70 * 1024 * 1024) // len(big) + 1
        with caplog.at_level(logging.ERROR, logger="wayline.nats"):
            await writer.publish("wire.sub", b"boom")
            for i in range(count):
                await writer.publish("wire.sub", big if i % 2 else str(i).encode())
            await writer.flush()
            await _until(lambda: len(got) == count, timeout=30)
        assert [g for g in got[::2]] == [str(i).encode() for i in range(0, count, 2)]
        assert errors == []
        assert "the handler's own failure" in caplog.text  # logged; the reader went on
        await sub.unsubscribe()
        await writer.publish("wire.sub", b"late")
        await writer.flush()
        await nc.flush()
        assert got[-1] != b"late" and len(got) == count
    finally:
        await nc.close()
        await writer.close()


@pytest.mark.slow
async def test_both_paths_work_across_a_server_restart(nats_server_own: NatsServer) -> None:
    reconnected = [asyncio.Event(), asyncio.Event()]

    def told(event: asyncio.Event) -> Any:
        async def cb() -> None:
            event.set()

        return cb

    nc, writer = [
        await _connect(
            nats_server_own,
            max_reconnect_attempts=-1,
            reconnect_time_wait=0.1,
            reconnected_cb=told(event),
        )
        for event in reconnected
    ]
    got: list[bytes] = []
    try:
        sub = await wire.subscribe(nc, "wire.restart", lambda msg: got.append(msg.data))
        await _subscribed(nc)
        await wire.publish(writer, "wire.restart", b"before")
        await _until(lambda: got == [b"before"])
        nats_server_own.restart()
        await asyncio.wait_for(asyncio.gather(*(e.wait() for e in reconnected)), 15)
        await nc.flush()  # the subscription is restored with the connection
        await wire.publish(writer, "wire.restart", b"after")
        await _until(lambda: b"after" in got, timeout=15)
        assert got[0] == b"before" and got[-1] == b"after"
        assert getattr(sub, "_wait_for_msgs_task", None) is None
        await sub.unsubscribe()
    finally:
        await nc.close()
        await writer.close()
