"""A store on a small filesystem that fills up mid-run (``docs/durability.md``, "A full
disk"): every refused write is a typed ``STORE_FULL`` error, never a raw ``sqlite3`` or OS
error and never a wedge; no run has a half-written record; every run completes once space is
freed. A real tmpfs (``tests/small_disk.py``) really fills up."""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

import wayline
from tests.nats_fixtures import NatsServer, require_nats, wait_reconnected
from tests.runtime.flows import lines, mark
from tests.runtime.harness import settings
from tests.small_disk import SmallDisk
from wayline._core.events import EventType
from wayline.errors import WaylineError, WorldStorageFullError, WorldUnavailableError
from wayline.worlds.local import LocalWorld

RUNS = 4
STEPS = 5
GATED = 2
"""Steps before this one complete at once; this one's body waits for the test's gate, so that
every run is mid-step when the disk fills."""
PAYLOAD = 64 * 1024
"""Each step's result: large enough that recording it needs new blocks of the filesystem."""
BUDGET = 3
"""The flow delivery budget of the workers (``WORKFLOW_MAX_QUEUE_DELIVERIES``, 48 by default),
small so that a full store spending it would fail the runs within the test's ``FULL_FOR``."""
FULL_FOR = 5.0
"""Seconds the store stays full once the worker met it: long enough for more than ``BUDGET``
redeliveries, each after 0.5 s times its attempt."""


@wayline.step
async def bulky(log: str, gate: str, i: int) -> str:
    ctx = wayline.step_context()
    while i >= GATED and not os.path.exists(gate):  # noqa: ASYNC110, ASYNC240 - a marker file
        await asyncio.sleep(0.02)
    mark(log, f"{ctx.run_id} {i} {time.time()!r}")
    return str(i) * PAYLOAD


@wayline.workflow
async def filling(log: str, gate: str) -> int:
    total = 0
    for i in range(STEPS):
        total += len(await bulky(log, gate, i))
    return total


def _errors(records: list[logging.LogRecord]) -> list[BaseException]:
    """The exceptions the worker logged, as objects (a log line's words are not asserted)."""
    found: list[BaseException] = []
    for record in records:
        if record.exc_info and record.exc_info[1] is not None:
            found.append(record.exc_info[1])
        args = record.args if isinstance(record.args, tuple) else ()
        found.extend(a for a in args if isinstance(a, BaseException))
    return found


async def _settled_steps(world: wayline.World, run_id: str) -> int:
    events = await world.list_events(run_id)
    return sum(e.type is EventType.STEP_COMPLETED for e in events)


async def _check_logs(world: wayline.World, run_ids: list[str], log: str) -> None:
    """Every run's log reads whole, each step is recorded once at most, and no body of a step
    ran after its completion was recorded (a body of a step whose completion could not be
    recorded runs again: at least once, as after any crash)."""
    bodies: dict[tuple[str, int], list[float]] = {}
    for line in lines(log):
        run_id, i, at = line.split()
        bodies.setdefault((run_id, int(i)), []).append(float(at))
    for run_id in run_ids:
        events = await world.list_events(run_id)
        assert [e.seq for e in events] == list(range(1, len(events) + 1))
        completed = [e for e in events if e.type is EventType.STEP_COMPLETED]
        created = [e for e in events if e.type is EventType.STEP_CREATED]
        by_step = Counter(e.correlation_id for e in completed)
        assert all(n == 1 for n in by_step.values()), by_step
        for i, done in enumerate(completed):
            assert len(done.data["result"]) == PAYLOAD  # stored whole, never cut short
            ran = bodies[(run_id, i)]
            assert ran and max(ran) <= done.created_at + 0.5, (run_id, i, ran, done.created_at)
        assert len(created) >= len(completed)


async def _wait(predicate: Callable[[], Awaitable[bool]], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not await predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout}s")
        await asyncio.sleep(0.05)


def _worker(world: wayline.World) -> wayline.Worker:
    """A worker whose delivery budget a full store would spend within ``FULL_FOR``: the store
    being full must not count against it (``Worker._drive``)."""
    return wayline.Worker(world, [filling], settings=settings(max_queue_deliveries=BUDGET))


class _Runs:
    """``RUNS`` runs of ``filling`` on one world, driven by one worker of this process."""

    def __init__(self, world: wayline.World, tmp_path: Path, caplog: pytest.LogCaptureFixture):
        self.world = world
        self.client = wayline.Client(world)
        self.log, self.gate = str(tmp_path / "bodies"), str(tmp_path / "gate")
        self.caplog = caplog
        caplog.set_level(logging.WARNING, logger="wayline")
        self.handles: list[wayline.RunHandle[int]] = []

    @property
    def ids(self) -> list[str]:
        return [h.run_id for h in self.handles]

    async def to_the_gate(self) -> None:
        """Start the runs and wait until each one is in its gated step's body."""
        self.handles = [await self.client.start(filling, self.log, self.gate) for _ in range(RUNS)]

        async def at_the_gate() -> bool:
            return all([await _settled_steps(self.world, r) == GATED for r in self.ids])

        await _wait(at_the_gate, 15)

    async def stalled(self, kind: type[WaylineError] | None) -> None:
        """The gate opened on a full store: the worker meets ``kind`` and tries again (None:
        it keeps asking within its hold and logs nothing yet); no raw error leaks, no run
        ends, every log reads whole."""

        async def seen_kind() -> bool:
            return any(isinstance(e, kind) for e in _errors(self.caplog.records))

        if kind is not None:
            await _wait(seen_kind, 20)
        await asyncio.sleep(FULL_FOR)
        seen = _errors(self.caplog.records)
        leaked = [e for e in seen if not isinstance(e, WaylineError)]
        assert not leaked, leaked  # never a sqlite3.Error, an OSError or a nats error
        assert not [h for h in self.handles if (await h.status()).terminal]
        await _check_logs(self.world, self.ids, self.log)

    async def complete(self, what: str, freed: float) -> None:
        results = await asyncio.gather(*(h.result(timeout=40) for h in self.handles))
        print(f"{what}: all {RUNS} runs completed {time.monotonic() - freed:.2f}s after freeing")
        assert results == [STEPS * PAYLOAD] * RUNS
        await _check_logs(self.world, self.ids, self.log)


async def test_a_sqlite_world_on_a_full_disk_fails_typed_and_resumes_when_freed(
    small_disk: SmallDisk, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    world = LocalWorld(small_disk.path / "wayline.db", poll_interval=0.01)
    async with world, _worker(world):
        runs = _Runs(world, tmp_path, caplog)
        await runs.to_the_gate()
        small_disk.fill()
        mark(runs.gate)

        # a call of the API on the full disk: refused, typed, nothing of it stored
        before = len(await world.list_runs(limit=100))
        with pytest.raises(WorldStorageFullError) as refused:
            await runs.client.start(filling, "x" * 300_000, runs.gate)
        assert refused.value.code == "STORE_FULL"
        assert len(await world.list_runs(limit=100)) == before
        await runs.stalled(WorldStorageFullError)

        small_disk.free()
        await runs.complete("sqlite", time.monotonic())
    async with LocalWorld(small_disk.path / "wayline.db") as reopened:
        await _check_logs(reopened, runs.ids, runs.log)
        for run_id in runs.ids:
            assert await _settled_steps(reopened, run_id) == STEPS


def _nats_server(small_disk: SmallDisk, tmp_path: Path, *args: str) -> NatsServer:
    server = NatsServer(require_nats(), small_disk.path, args=args)
    server.log_path = tmp_path / "nats-server.log"  # off the small disk: the log must not fill it
    server.start()
    return server


def _nats_world(server: NatsServer) -> wayline.World:
    from wayline.worlds.nats import NatsWorld

    # a short request timeout: a full server does not answer, and each append tries three times
    return NatsWorld(
        server.url, prefix="full", connect_attempts=5, reconnect_time_wait=0.2, request_timeout=1.0
    )


async def test_a_nats_store_at_its_limit_fails_typed_and_resumes_when_freed(
    small_disk: SmallDisk, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """JetStream's own limit (``max_file_store``) reached mid-run: the server answers each
    write with 10023 "insufficient resources", the world raises ``STORE_FULL``, and the runs
    move on without a restart once the store has room (here: the stream that filled it is
    deleted)."""
    import nats

    conf = tmp_path / "limit.conf"
    conf.write_text("jetstream { max_file_store: 4MB }\n")
    server = _nats_server(small_disk, tmp_path, "-c", str(conf))
    filler = await nats.connect(server.url)
    try:
        world = _nats_world(server)
        async with world, _worker(world):
            runs = _Runs(world, tmp_path, caplog)
            await runs.to_the_gate()
            js = filler.jetstream()
            await js.add_stream(name="FILLER", subjects=["filler"])
            while True:  # fill JetStream's store to its limit, not the filesystem
                try:
                    await js.publish("filler", b"\0" * 65536, timeout=5)
                except nats.js.errors.ServiceUnavailableError as err:
                    assert err.err_code == 10023, err
                    break
            mark(runs.gate)

            with pytest.raises(WorldStorageFullError) as refused:
                await runs.client.start(filling, "x" * 300_000, runs.gate)
            assert refused.value.code == "STORE_FULL"
            await runs.stalled(WorldStorageFullError)

            await js.delete_stream("FILLER")
            await runs.complete("nats, JetStream limit", time.monotonic())
    finally:
        await filler.close()
        server.stop()


async def test_a_nats_server_whose_disk_fills_resumes_after_space_is_freed_and_a_restart(
    small_disk: SmallDisk, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The filesystem under nats-server's store fills up mid-run (not JetStream's limit: a
    file of someone else's). nats-server 2.15 then answers no write (it logs "JetStream failed
    to store a msg ... no space left on device"), so the world raises ``WORLD_UNAVAILABLE``
    after its request timeout to a client (a worker holding a delivery keeps asking), and the
    stream keeps failing after space is freed until the server is restarted
    (``docs/durability.md``): after that every run completes."""
    server = _nats_server(small_disk, tmp_path)
    try:
        world, clients = _nats_world(server), _nats_world(server)
        # The client has a connection of its own, as in another process: a worker that holds
        # a delivery keeps asking its append again, and a read of that run by the same world
        # waits for the append (its view is not current meanwhile).
        async with world, clients, wayline.Worker(world, [filling]):
            runs = _Runs(clients, tmp_path, caplog)
            await runs.to_the_gate()
            small_disk.fill()
            mark(runs.gate)

            # no answer: its cause is not named. A start small enough to land in the free tail
            # of a page the store's last block file already holds is still stored (the
            # filesystem refuses only a new block), so starts are made until one is refused.
            refused = None
            for _ in range(20):
                try:
                    await runs.client.start(filling, runs.log, runs.gate)
                except WorldUnavailableError as err:
                    refused = err
                    break
            assert refused is not None, "20 starts were all stored on a full disk"
            # A server that answers nothing looks like a stream leader's election to a worker
            # that holds the delivery: it asks again for as long as it holds it
            # (docs/nats.md, "A stream leader that crashes"), so nothing is logged yet.
            await runs.stalled(None)

            small_disk.free()
            freed = time.monotonic()
            server.restart()
            await wait_reconnected(world, clients)
            await runs.complete("nats, disk full", freed)
    finally:
        server.stop()


async def test_a_group_commit_on_a_full_disk_fails_every_append_of_its_batch_and_writes_none(
    small_disk: SmallDisk,
) -> None:
    """Appends of several runs made at one moment share one SQLite transaction (group
    commit). On a full disk every one of them fails typed, none is told it was written, and
    nothing of any is stored; once space is freed the same appends land, each once."""
    from wayline._core.events import NewEvent
    from wayline._core.ids import new_run_id

    async with LocalWorld(small_disk.path / "wayline.db") as world:
        ids = [new_run_id() for _ in range(6)]
        for run_id in ids:
            created = {"workflow": "w", "input": {"args": []}}
            await world.append(run_id, [NewEvent(EventType.RUN_CREATED, data=created)])
            await world.append(run_id, [NewEvent(EventType.RUN_STARTED)])

        def appends() -> list[Awaitable[object]]:
            data = {"stepName": "a", "input": ["x" * 50_000]}
            step = NewEvent(EventType.STEP_CREATED, "s1", data)
            return [world.append(run_id, [step]) for run_id in ids]

        small_disk.fill()
        refused = await asyncio.gather(*appends(), return_exceptions=True)
        assert all(isinstance(r, WorldStorageFullError) for r in refused), refused
        for run_id in ids:
            events = await world.list_events(run_id)
            assert [e.type for e in events] == [EventType.RUN_CREATED, EventType.RUN_STARTED]

        small_disk.free()
        landed = await asyncio.gather(*appends())
        assert [[e.seq for e in events] for events in landed] == [[3]] * len(ids)
    async with LocalWorld(small_disk.path / "wayline.db") as reopened:
        for run_id in ids:
            assert [e.seq for e in await reopened.list_events(run_id)] == [1, 2, 3]
