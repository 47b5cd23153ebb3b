"""A stop while the NATS world is connecting (a worker waiting for its server, SIGTERMed)
leaves nothing behind that asyncio reports: seen at load 10-24 as a traceback in
``wayline worker``'s output ("Task exception was never retrieved", NoServersError) in
tests/cli/test_supervisor.py.

nats-py can swallow the cancel (Python 3.11's ``asyncio.wait_for`` around its socket connect
returns what the connect gave when the cancel comes at the same moment) and end the attempt
with NoServersError instead. That moment cannot be hit on purpose against a real server, so
the client's ``connect`` is replaced by one that does what nats-py then does."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
from pathlib import Path
from typing import Any

import pytest

from tests.nats_fixtures import NatsServer, free_port
from wayline.errors import WorldUnavailableError
from wayline.worlds.nats import NatsWorld


async def test_a_stop_that_nats_py_swallows_while_connecting_is_not_reported(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from nats.aio.client import Client

    from nats import errors

    entered = asyncio.Event()

    async def connect(self: Client, *args: Any, **kwargs: Any) -> None:
        entered.set()
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:  # swallowed: the attempt goes on and fails
            await asyncio.sleep(0)
            raise errors.NoServersError from None

    monkeypatch.setattr(Client, "connect", connect)
    loop = asyncio.get_running_loop()
    reported: list[dict[str, Any]] = []
    previous = loop.get_exception_handler()
    loop.set_exception_handler(lambda _, context: reported.append(context))
    try:
        world = NatsWorld(f"nats://127.0.0.1:{free_port()}", connect_attempts=1)
        starting = asyncio.ensure_future(world.start())
        await asyncio.wait_for(entered.wait(), 10)
        starting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await starting
        await world.close()
        del starting
        for _ in range(3):  # the attempt's task is reported when it is collected
            await asyncio.sleep(0)
            gc.collect()
    finally:
        loop.set_exception_handler(previous)
    assert [c.get("message") for c in reported] == []


def _sockets_to(port: int) -> int:
    """This process's TCP sockets whose far end is ``port`` on this machine, in any state
    but closed (read from /proc: a leaked client is a socket still open)."""
    fd_dir = Path("/proc/self/fd")
    inodes = set()
    for fd in fd_dir.iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    count = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            remote_port = int(fields[2].rsplit(":", 1)[1], 16)
            if remote_port == port and fields[9] in inodes and fields[3] != "07":
                count += 1
    return count


def _reports(loop: asyncio.AbstractEventLoop) -> list[dict[str, Any]]:
    reported: list[dict[str, Any]] = []
    loop.set_exception_handler(lambda _, context: reported.append(context))
    return reported


@pytest.mark.skipif(not Path("/proc/net/tcp").exists(), reason="reads sockets from /proc")
async def test_a_stop_at_any_moment_of_a_real_connect_leaves_no_socket_and_no_report(
    nats_server_auth: NatsServer,
) -> None:
    """Against a real server, a stop after 0, 1, 2, ... turns of the loop into the connect
    (before the socket, during the handshake, after it) either stops the start or lets it
    finish; either way, once the world is closed, no socket to the server is left open, no
    task of the attempt is left running and asyncio reports nothing."""
    loop = asyncio.get_running_loop()
    previous = loop.get_exception_handler()
    reported = _reports(loop)
    url = f"nats://wayline:s3cret%3Apw@127.0.0.1:{nats_server_auth.port}?prefix=cancelconn"
    before = asyncio.all_tasks()
    outcomes: set[str] = set()
    # Each turn collects three times; a full collection walks every object the test process
    # holds (0.3-2 s a turn under load, most of the test). Frozen, the objects made before the
    # loop are left out of the walk; everything a turn makes (the world, its client, its
    # tasks and sockets) is still collected as before.
    gc.freeze()
    try:
        for turns in range(40):
            world = NatsWorld.from_url(url, connect_attempts=1)
            starting = asyncio.ensure_future(world.start())
            for _ in range(turns):
                await asyncio.sleep(0)
            asked = starting.cancel()
            try:
                await starting
                outcomes.add("started")
                # a stop asked before the start ended is never dropped (the test below)
                assert not asked, f"a stop {turns} turns in was dropped"
            except asyncio.CancelledError:
                outcomes.add("stopped")
            await world.close()
            del starting
            for _ in range(3):
                await asyncio.sleep(0)
                gc.collect()
            assert _sockets_to(nats_server_auth.port) == 0, f"a socket left after {turns} turns"
            left = {t for t in asyncio.all_tasks() - before if t is not asyncio.current_task()}
            assert not left, f"tasks left after {turns} turns: {left}"
    finally:
        gc.unfreeze()
        loop.set_exception_handler(previous)
    assert [c.get("message") for c in reported] == []
    assert "stopped" in outcomes


@pytest.mark.parametrize(
    ("password", "attempts", "error"),
    [("nope", 1, WorldUnavailableError), ("nope", 3, WorldUnavailableError)],
)
async def test_a_refused_login_is_reported_once_and_leaves_no_socket(
    nats_server_auth: NatsServer, password: str, attempts: int, error: type[Exception]
) -> None:
    """A real connect error still reaches the caller, once, as the error that names the
    server, with nothing else reported by asyncio and no socket left open."""
    loop = asyncio.get_running_loop()
    previous = loop.get_exception_handler()
    reported = _reports(loop)
    base = f"127.0.0.1:{nats_server_auth.port}"
    world = NatsWorld.from_url(f"nats://wayline:{password}@{base}", connect_attempts=attempts)
    try:
        with pytest.raises(error) as info:
            await world.start()
        await world.close()
        for _ in range(3):
            await asyncio.sleep(0)
            gc.collect()
    finally:
        loop.set_exception_handler(previous)
    assert base in str(info.value) and password not in str(info.value)
    assert [c.get("message") for c in reported] == []
    assert _sockets_to(nats_server_auth.port) == 0


async def test_a_stop_that_comes_as_the_connect_ends_stops_the_start(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A stop that comes in the same turn of the loop as the connect's end is not lost: the
    start raises CancelledError and closes its client, where Python 3.11's ``wait_for``
    returned the client and dropped the stop (the start then went on as if none came)."""
    from nats.aio.client import Client

    starting: asyncio.Future[None] | None = None
    closed: list[Client] = []

    async def connect(self: Client, *args: Any, **kwargs: Any) -> None:
        assert starting is not None
        starting.cancel()  # the stop comes; this attempt ends connected all the same

    async def close(self: Client) -> None:
        closed.append(self)

    monkeypatch.setattr(Client, "connect", connect)
    monkeypatch.setattr(Client, "close", close)
    world = NatsWorld(f"nats://127.0.0.1:{free_port()}", connect_attempts=1)
    starting = asyncio.ensure_future(world.start())
    with pytest.raises(asyncio.CancelledError):
        await starting
    assert len(closed) == 1
    await world.close()


async def _stop_once_held(starting: asyncio.Future[None], held: asyncio.Event) -> None:
    """Stops ``starting`` once its setup is held, and sees the stop end it."""
    await asyncio.wait_for(held.wait(), 30)
    assert starting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await starting


async def test_a_stop_that_a_request_of_the_setup_swallows_stops_the_start(
    nats_server: NatsServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stop that comes after the connect, while the start sets up its streams, stops the
    start and closes its client, even when a request of the setup swallows it: nats-py's
    ``request`` waits with ``asyncio.wait_for``, which in Python 3.11 returns the answer and
    drops the stop when both come in the same turn of the loop (seen once in the 40 stop
    moments above). The setup is held after its streams are made, on a request that takes the
    stop as that ``wait_for`` does; the start then went on as if no stop had come."""
    from wayline.worlds.nats import world as world_module

    real = world_module.provision
    held = asyncio.Event()

    async def provision(*args: Any, **kwargs: Any) -> None:
        await real(*args, **kwargs)
        held.set()
        try:  # a last request of the setup, waiting for its answer
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            pass  # the answer came with the stop, and wait_for returned it

    monkeypatch.setattr(world_module, "provision", provision)
    loop = asyncio.get_running_loop()
    previous = loop.get_exception_handler()
    reported = _reports(loop)
    before = asyncio.all_tasks()
    world = NatsWorld(nats_server.url, prefix="stopinsetup", connect_attempts=1)
    try:
        await _stop_once_held(asyncio.ensure_future(world.start()), held)
        await world.close()
        for _ in range(3):  # a task of the start is reported when it is collected
            await asyncio.sleep(0)
            gc.collect()
    finally:
        loop.set_exception_handler(previous)
    assert _sockets_to(nats_server.port) == 0
    left = {t for t in asyncio.all_tasks() - before if t is not asyncio.current_task()}
    assert not left
    assert [c.get("message") for c in reported] == []


async def test_a_stop_that_a_world_call_swallows_stops_the_worker_start(
    nats_server: NatsServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same for a worker's start: a stop while it writes its first heartbeat, which a
    request of that write takes as Python 3.11's ``wait_for`` does, stops the start, and no
    consumer is left serving. The worker spawned its consumers and served on."""
    import wayline
    from tests.runtime import start_flows as sf
    from tests.runtime.harness import settings

    world = NatsWorld(nats_server.url, prefix="stopinworkerstart")
    held = asyncio.Event()

    async def record_served(entries: Any) -> None:
        held.set()
        try:  # a request of the heartbeat's write, waiting for its answer
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            pass  # the answer came with the stop, and wait_for returned it

    monkeypatch.setattr(world, "record_served", record_served)
    worker = wayline.Worker(world, sf.WORKFLOWS, settings=settings(), recover=False)
    try:
        await _stop_once_held(asyncio.ensure_future(worker.start()), held)
        assert not worker.consuming()
        assert not [t for t in asyncio.all_tasks() if t.get_name().endswith("-consumer")]
    finally:
        await worker.close()
        await world.close()


async def _swallow_then_fail(held: asyncio.Event) -> None:
    """A request that takes the stop as Python 3.11's ``wait_for`` does (it returns and drops
    the stop), and whose caller then fails as a request of the start can: the next request
    timed out."""
    held.set()
    try:
        await asyncio.Event().wait()
    except asyncio.CancelledError:
        pass
    raise WorldUnavailableError("NATS at test: a request of the setup timed out")


async def test_a_stop_that_a_failed_setup_swallowed_stops_the_start(
    nats_server: NatsServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stop that a request of the setup swallows, after which the setup fails, is raised as
    the stop and not as the setup's error: a caller that starts the world again on a
    WorldUnavailableError (a worker waiting for its world) took the stop for an outage and
    served on. The client is closed all the same."""
    from wayline.worlds.nats import world as world_module

    held = asyncio.Event()

    async def provision(*args: Any, **kwargs: Any) -> None:
        await _swallow_then_fail(held)

    monkeypatch.setattr(world_module, "provision", provision)
    world = NatsWorld(nats_server.url, prefix="stopinfailedsetup", connect_attempts=1)
    await _stop_once_held(asyncio.ensure_future(world.start()), held)
    await world.close()
    assert _sockets_to(nats_server.port) == 0


async def test_a_stop_that_a_failed_connect_swallowed_stops_the_start(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The same when the connect swallows the stop and then fails (the close of a failed
    attempt waits with ``wait_for``): the start raised WorldUnavailableError."""
    from wayline.worlds.nats import world as world_module

    held = asyncio.Event()

    async def connect(*args: Any, **kwargs: Any) -> Any:
        await _swallow_then_fail(held)

    monkeypatch.setattr(world_module, "connect", connect)
    world = NatsWorld(f"nats://127.0.0.1:{free_port()}", connect_attempts=1)
    await _stop_once_held(asyncio.ensure_future(world.start()), held)
    await world.close()


async def test_a_stop_that_a_failed_worker_start_swallowed_stops_it(
    nats_server: NatsServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same for a worker's start that fails after a world call swallowed the stop (its
    recovery pass, here): the stop, not the error, so a caller that starts the worker again
    on a world error does not."""
    import wayline
    from tests.runtime import start_flows as sf
    from tests.runtime.harness import settings

    world = NatsWorld(nats_server.url, prefix="stopinfailedworkerstart")
    worker = wayline.Worker(world, sf.WORKFLOWS, settings=settings(), recover=True)
    held = asyncio.Event()

    async def recover_runs() -> dict[str, int]:
        await _swallow_then_fail(held)
        return {}

    monkeypatch.setattr(worker, "recover_runs", recover_runs)
    try:
        await _stop_once_held(asyncio.ensure_future(worker.start()), held)
        assert not worker.consuming()
    finally:
        await worker.close()
        await world.close()


async def test_a_timeout_that_the_setup_swallows_ends_the_start_as_a_timeout(
    nats_server: NatsServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``asyncio.timeout`` stops by a cancel: one that a request of the setup swallows is
    raised by the start's count of cancels, and the timeout turns it into TimeoutError and
    takes it off the count, also in a task that counted a cancel it handled before. Neither
    a stray CancelledError nor a start that goes on past its timeout."""
    from wayline.worlds.nats import world as world_module

    real = world_module.provision

    async def provision(*args: Any, **kwargs: Any) -> None:
        await real(*args, **kwargs)
        with contextlib.suppress(asyncio.CancelledError):  # the answer came with the stop
            await asyncio.Event().wait()

    monkeypatch.setattr(world_module, "provision", provision)
    task = asyncio.current_task()
    assert task is not None
    for handled in (0, 1):
        if handled:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.sleep(1)
        world = NatsWorld(nats_server.url, prefix="timeoutinsetup", connect_attempts=1)
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(2.0):
                await world.start()
        assert task.cancelling() == handled
        await world.close()
    task.uncancel()
    assert _sockets_to(nats_server.port) == 0
