"""A lost connection under the world's own publishes (``worlds/nats/wire.py``): a world
behind a TCP proxy of the test's own, which can hold what the client sends and reset the
connection (an RST, as a crashed server with unread data, a load balancer or a NAT timing
out sends), and a real server crashed or stopped under load. What is in flight is retried
once reconnected, never raised to the caller, and never waits out its timeout."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
import uuid
from typing import Any

import pytest

from tests.nats_fixtures import NatsServer
from wayline._core.events import EventType, NewEvent
from wayline._core.ids import new_run_id
from wayline.errors import WorldUnavailableError

nats = pytest.importorskip("nats")


class ResetProxy:
    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.flowing = asyncio.Event()  # cleared: what the client sends is held back
        self.flowing.set()
        self.conns: list[tuple[Any, Any]] = []
        self.pipes: set[asyncio.Task[None]] = set()
        self.closed = False

    @property
    def hold(self) -> bool:
        return not self.flowing.is_set()

    @hold.setter
    def hold(self, value: bool) -> None:
        if value:
            self.flowing.clear()
        else:
            self.flowing.set()

    async def start(self) -> None:
        self.server = await asyncio.start_server(self._on_client, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]

    async def _on_client(self, cr: Any, cw: Any) -> None:
        sr, sw = await asyncio.open_connection("127.0.0.1", self.target_port)
        if self.closed:
            cw.transport.abort()
            sw.transport.abort()
            return
        self.conns.append((cw, sw))

        async def pipe(r: Any, w: Any, upstream: bool) -> None:
            try:
                while True:
                    data = await r.read(65536)
                    if not data:
                        break
                    if upstream:
                        await self.flowing.wait()
                    if w.is_closing():
                        break
                    w.write(data)
                    await w.drain()
            except Exception:  # a reset connection: the pipe ends with it
                pass

        for r, w, upstream in ((cr, sw, True), (sr, cw, False)):
            task = asyncio.ensure_future(pipe(r, w, upstream))
            self.pipes.add(task)
            task.add_done_callback(self.pipes.discard)

    async def reset_now(self) -> None:
        """reset(), and one turn of the loop for the aborted sockets to be closed (asyncio
        closes them in connection_lost, a turn later): the RST is then in the client's
        socket, which nats-py's reader has not read yet."""
        self.reset()
        await asyncio.sleep(0)

    def reset(self) -> None:
        """RST the client's connection (SO_LINGER 0), drop the server side. A client side
        the client has closed already (its socket gone, ``fd`` -1) takes no option: setting
        one raised ``EBADF`` in a teardown, which then left the pipes' tasks and sockets to
        the next test."""
        for cw, sw in self.conns:
            if not cw.transport.is_closing():
                sock = cw.get_extra_info("socket")
                with contextlib.suppress(OSError):
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            cw.transport.abort()
            sw.transport.abort()
        self.conns.clear()

    async def close(self) -> None:
        self.closed = True  # a client still connecting is dropped once its upstream opens
        self.server.close()
        self.hold = False
        self.reset()
        await self.server.wait_closed()
        for task in list(self.pipes):
            task.cancel()
        await asyncio.gather(*self.pipes, return_exceptions=True)


async def _world(proxy: ResetProxy, prefix: str, **options: Any) -> Any:
    from wayline.worlds.nats import NatsWorld

    options.setdefault("connect_attempts", 5)
    options.setdefault("reconnect_time_wait", 0.2)
    world = NatsWorld(f"nats://127.0.0.1:{proxy.port}", prefix=prefix, **options)
    await world.start()
    return world


@pytest.fixture
async def proxied(nats_server: NatsServer) -> Any:
    proxy = ResetProxy(nats_server.port)
    await proxy.start()
    worlds: list[Any] = []
    prefix = "r" + uuid.uuid4().hex[:12]  # every world of one test shares it

    async def open_world(**options: Any) -> Any:
        world = await _world(proxy, prefix, **options)
        worlds.append(world)
        return world

    yield proxy, open_world
    for world in worlds:
        await world.close()
    await proxy.close()


async def test_an_enqueue_made_right_after_a_reset_is_retried(proxied: Any) -> None:
    """The connection was reset and nats-py's reader has not seen it yet: the publish is
    written into the dead socket. Its drain's error starts the reconnect (as nats-py's flusher
    does), the lost reply fails the publish at once, and the enqueue is retried."""
    proxy, open_world = proxied
    world = await open_world(request_timeout=30.0)  # a reply waited out would fail this
    await world.enqueue("flow", {"warm": True})  # the shared reply inbox exists
    await proxy.reset_now()
    await asyncio.wait_for(world.enqueue("flow", {"after": "reset"}), 15)
    got: list[Any] = []
    for _ in range(20):
        got += await world.receive("flow", max_messages=5, wait_seconds=1)
        if len(got) >= 2:
            break
    assert sorted(str(d.payload) for d in got) == ["{'after': 'reset'}", "{'warm': True}"]


async def test_an_append_made_right_after_a_reset_is_retried(proxied: Any) -> None:
    proxy, open_world = proxied
    world = await open_world(request_timeout=30.0)
    run_id = new_run_id()
    await world.append(run_id, [NewEvent(EventType.RUN_CREATED, data={"workflow": "w"})])
    await proxy.reset_now()
    await asyncio.wait_for(world.append(run_id, [NewEvent(EventType.RUN_STARTED, data={})]), 15)
    assert [e.type for e in await world.list_events(run_id)] == [
        EventType.RUN_CREATED,
        EventType.RUN_STARTED,
    ]


async def test_an_ack_made_right_after_a_reset_answers(proxied: Any) -> None:
    """A one-way ack into a lost connection is lost (the message comes back after its ack
    wait, by design): ``ack`` answers, it does not raise."""
    proxy, open_world = proxied
    world = await open_world()
    await world.enqueue("flow", {"x": 1})
    [delivery] = await world.receive("flow", max_messages=1, wait_seconds=2)
    await proxy.reset_now()
    assert await world.ack(delivery) in (True, False)


async def test_an_enqueue_in_flight_when_the_connection_drops_does_not_wait_its_timeout(
    proxied: Any,
) -> None:
    """The publish left the client and never reached the server, then the connection was
    reset: its reply cannot come. The world fails it when the connection is lost, and it is
    retried once reconnected, long before its 30 s request timeout."""
    proxy, open_world = proxied
    world = await open_world(request_timeout=30.0)
    await world.enqueue("flow", {"warm": True})
    proxy.hold = True  # what the client sends is held: the server never sees it
    task = asyncio.ensure_future(world.enqueue("flow", {"in": "flight"}))
    await asyncio.sleep(0.3)
    proxy.hold = False
    proxy.reset()
    await asyncio.wait_for(task, 15)  # (it waited the 30 s out before)


async def test_a_read_in_flight_when_the_connection_drops_fails_at_once(proxied: Any) -> None:
    """A direct get (a run's log read by a world that has not loaded it) whose request was
    held, then the connection reset: it fails as unavailable (what its timeout would raise)
    when the connection is lost, not 30 s later, and reads once reconnected."""
    proxy, open_world = proxied
    writer = await open_world()
    run_id = new_run_id()
    await writer.append(run_id, [NewEvent(EventType.RUN_CREATED, data={"workflow": "w"})])
    reader = await open_world(request_timeout=30.0)  # no projection of the run: it must read
    proxy.hold = True
    task = asyncio.ensure_future(reader.list_events(run_id))
    await asyncio.sleep(0.3)
    proxy.hold = False
    proxy.reset()
    with pytest.raises(WorldUnavailableError):
        await asyncio.wait_for(task, 15)
    for _ in range(100):  # once reconnected, the read goes through
        try:
            events = await reader.list_events(run_id)
            break
        except WorldUnavailableError:
            await asyncio.sleep(0.1)
    assert [e.type for e in events] == [EventType.RUN_CREATED]


@pytest.mark.slow
@pytest.mark.parametrize("kill", [True, False], ids=["sigkill", "sigterm"])
async def test_enqueues_under_load_across_a_server_restart(
    open_own_world: Any, nats_server_own: NatsServer, kill: bool
) -> None:
    """40 callers enqueue in a loop while the server crashes (or stops) and comes back: no
    enqueue fails (those in flight are retried under their own message id, a stream with no
    leader yet answers 503 and is asked again), and each enqueue (one key each) is answered
    with a message of its own."""
    world = await open_own_world()
    await world.enqueue("flow", {"warm": True})
    stop = asyncio.Event()
    failures: list[BaseException] = []
    sent: list[str] = []

    async def caller(n: int) -> None:
        i = 0
        while not stop.is_set():
            i += 1
            try:
                sent.append(
                    await world.enqueue("flow", {"n": n, "i": i}, idempotency_key=f"{n}:{i}")
                )
            except Exception as err:
                failures.append(err)
            await asyncio.sleep(0)

    tasks = [asyncio.ensure_future(caller(n)) for n in range(40)]
    await asyncio.sleep(0.5)
    loop = asyncio.get_running_loop()
    await loop.run_in_executor(None, lambda: nats_server_own.restart(kill=kill))
    await asyncio.sleep(1.5)
    stop.set()
    await asyncio.wait_for(asyncio.gather(*tasks), 60)
    causes = sorted({f"{f!r} <- {f.__cause__!r}" for f in failures})
    assert not failures, (len(failures), causes)
    assert len(set(sent)) == len(sent)  # one message id per (caller, i): none answered twice


async def _disconnected(world: Any) -> None:
    for _ in range(1000):
        if not world._nc.is_connected:
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the world did not see its server go")


async def test_an_enqueue_that_finds_no_connection_in_time_is_unavailable(
    open_own_world: Any, nats_server_own: NatsServer
) -> None:
    """While the server is away, an enqueue waits for the connection up to its request
    timeout, then fails as ``WorldUnavailableError`` (what callers retry), not as a plain
    ``WorldError``; so does an append."""
    world = await open_own_world(request_timeout=1.0)
    await world.enqueue("flow", {"warm": True})
    nats_server_own.stop()
    try:
        await _disconnected(world)
        with pytest.raises(WorldUnavailableError):
            await world.enqueue("flow", {"x": 1})
        with pytest.raises(WorldUnavailableError):
            await world.append(
                new_run_id(), [NewEvent(EventType.RUN_CREATED, data={"workflow": "w"})]
            )
    finally:
        nats_server_own.start()


async def test_a_world_closed_with_requests_in_flight_fails_them_at_once(proxied: Any) -> None:
    """``close()`` while an enqueue, an append and a read wait for replies that cannot come
    (what the client sent is held): each fails as unavailable when the world closes, not
    after its 30 s request timeout, and the close itself does not wait for them."""
    proxy, open_world = proxied
    writer = await open_world()
    run_id = new_run_id()
    await writer.append(run_id, [NewEvent(EventType.RUN_CREATED, data={"workflow": "w"})])
    world = await open_world(request_timeout=30.0)
    await world.enqueue("flow", {"warm": True})  # the shared reply inbox exists
    other = new_run_id()
    await world.append(other, [NewEvent(EventType.RUN_CREATED, data={"workflow": "w"})])
    proxy.hold = True  # what the client sends is held: no reply comes
    tasks = [
        asyncio.ensure_future(world.enqueue("flow", {"in": "flight"})),
        asyncio.ensure_future(
            world.append(other, [NewEvent(EventType.RUN_STARTED)], expected_seq=1)
        ),
        asyncio.ensure_future(world.list_events(run_id)),  # not loaded here: a read
    ]
    await asyncio.sleep(0.3)
    loop = asyncio.get_running_loop()
    began = loop.time()
    await asyncio.wait_for(world.close(), 15)
    outcomes = await asyncio.wait_for(asyncio.gather(*tasks, return_exceptions=True), 15)
    assert loop.time() - began < 15
    for outcome in outcomes:
        assert isinstance(outcome, WorldUnavailableError), outcomes


async def test_a_pull_in_flight_when_the_connection_drops_ends_at_once(proxied: Any) -> None:
    """A receive waiting 20 s for a message when the connection is reset: its pull is lost
    with the connection (the server forgets it), so it ends at once with nothing instead of
    waiting out its wait and the request timeout, and the next receive, once reconnected,
    takes what was enqueued meanwhile."""
    proxy, open_world = proxied
    world = await open_world(request_timeout=30.0)
    sender = await open_world()
    await world.enqueue("flow", {"warm": True})
    [warm] = await world.receive("flow", max_messages=1, wait_seconds=2)
    assert await world.ack(warm)
    loop = asyncio.get_running_loop()
    waiting = asyncio.ensure_future(world.receive("flow", max_messages=1, wait_seconds=20))
    await asyncio.sleep(0.5)  # the pull is with the server
    began = loop.time()
    proxy.reset()
    assert await asyncio.wait_for(waiting, 15) == []
    assert loop.time() - began < 15
    await sender.enqueue("flow", {"after": "reset"})
    got: list[Any] = []
    for _ in range(20):
        try:
            got += await world.receive("flow", max_messages=1, wait_seconds=1)
        except WorldUnavailableError:  # not reconnected yet
            await asyncio.sleep(0.1)
        if got:
            break
    assert [d.payload for d in got] == [{"after": "reset"}]


async def test_a_world_closed_with_a_pull_in_flight_ends_it_at_once(proxied: Any) -> None:
    """``close()`` while a receive waits 20 s: the pull ends with the world, at once."""
    _, open_world = proxied
    world = await open_world(request_timeout=30.0)
    await world.enqueue("flow", {"warm": True})
    [warm] = await world.receive("flow", max_messages=1, wait_seconds=2)
    assert await world.ack(warm)
    waiting = asyncio.ensure_future(world.receive("flow", max_messages=1, wait_seconds=20))
    await asyncio.sleep(0.5)
    await asyncio.wait_for(world.close(), 15)
    assert await asyncio.wait_for(waiting, 5) == []


async def test_a_world_closed_while_it_connects_does_not_open(nats_server: NatsServer) -> None:
    """``close()`` while ``start()`` is still connecting: the start fails as unavailable and
    leaves no connection open (it opened one after the close had returned, which nobody
    closed); the world can be started again afterwards."""
    from wayline.worlds.nats import NatsWorld

    world = NatsWorld(nats_server.url, prefix="c" + uuid.uuid4().hex[:12])
    starting = asyncio.ensure_future(world.start())
    await asyncio.sleep(0)  # connecting
    await world.close()
    with pytest.raises(WorldUnavailableError):
        await asyncio.wait_for(starting, 15)
    with pytest.raises(WorldUnavailableError):
        await world.enqueue("flow", {"x": 1})
    await world.start()
    try:
        assert await world.enqueue("flow", {"x": 2})
    finally:
        await world.close()


async def test_a_request_begun_as_the_world_closes_leaves_no_unretrieved_future(
    proxied: Any,
) -> None:
    """An operation's next nats-py request made while the connection closes: its publish
    raises ``ConnectionClosedError`` to the caller and leaves its reply future behind, which
    ``close()`` then fails with the rest. asyncio must not log it as never retrieved."""
    import gc

    _, open_world = proxied
    world = await open_world()
    nc = world._nc
    await world.enqueue("flow", {"warm": True})
    loop = asyncio.get_running_loop()
    seen: list[str] = []
    old = loop.get_exception_handler()
    loop.set_exception_handler(lambda _loop, ctx: seen.append(str(ctx.get("message"))))
    try:
        closing = asyncio.ensure_future(world.close())
        while not nc.is_closed:  # noqa: ASYNC110 - nats-py sets no event for it
            await asyncio.sleep(0)
        with pytest.raises(nats.errors.ConnectionClosedError):
            await nc.request("$JS.API.INFO", b"", timeout=5)
        await closing
        for _ in range(3):
            await asyncio.sleep(0)
        gc.collect()
    finally:
        loop.set_exception_handler(old)
    assert not [m for m in seen if "never retrieved" in m], seen


async def test_an_unkeyed_enqueue_answered_wrong_last_sequence_is_a_world_error(
    proxied: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A 10071 can only answer a publish that expected a sequence; one for an unkeyed
    enqueue (which expects none) is the server's error, reported as ``WorldError``."""
    from wayline.errors import WorldError
    from wayline.worlds.nats import direct

    _, open_world = proxied
    world = await open_world()

    async def refused(*_args: Any, **_kwargs: Any) -> Any:
        raise nats.js.errors.BadRequestError(
            code=400, err_code=10071, description="wrong last sequence: 7"
        )

    monkeypatch.setattr(direct, "publish_acked", refused)
    with pytest.raises(WorldError, match="expected none"):
        await world.enqueue("flow", {"unkeyed": True})


async def test_a_world_closed_while_it_provisions_does_not_stay_open(
    nats_server: NatsServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """close() lands while start() is past its connect (its last request's answer is in,
    start() not resumed yet): the close returned, so the world must not end up started on
    the connection the close closed."""
    from wayline.worlds.nats import NatsWorld
    from wayline.worlds.nats import queue as queue_mod

    gate, reached = asyncio.Event(), asyncio.Event()
    real = queue_mod.Queue.start

    async def gated(self: Any) -> None:
        await real(self)
        reached.set()
        await gate.wait()  # the answer is in; the close runs before start() resumes

    monkeypatch.setattr(queue_mod.Queue, "start", gated)
    world = NatsWorld(nats_server.url, prefix="c" + uuid.uuid4().hex[:12])
    starting = asyncio.ensure_future(world.start())
    await asyncio.wait_for(reached.wait(), 15)
    await world.close()
    gate.set()
    outcome = await asyncio.gather(asyncio.wait_for(starting, 15), return_exceptions=True)
    state = (world._nc is not None, world._nc.is_closed if world._nc else None)
    await world.start()  # a later start opens the world again (it was a no-op)
    again = await asyncio.gather(world.enqueue("flow", {"x": 1}), return_exceptions=True)
    await world.close()
    assert state == (False, None), f"start()={outcome}; (_nc set, closed)={state}; then {again!r}"
    assert isinstance(outcome[0], WorldUnavailableError)
