"""The SQLite world's writes: a step costs at most six statements in the transaction that
records it, concurrent appends of many runs share one commit (group commit) while each keeps
its own validation result, and the world is durable (fsync per commit) unless the URL says
``?sync=normal``. SQLite only: statements and PRAGMAs are the embedded world's own."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest

import wayline
from tests.runtime import flows
from tests.runtime.harness import settings
from wayline._core.events import EventType as T
from wayline._core.events import NewEvent
from wayline._core.ids import new_run_id
from wayline.cli.commands import absolute_world_url, sqlite_path
from wayline.errors import ConfigurationError, EntityConflictError, SequenceConflictError
from wayline.world import World
from wayline.worlds.local import LocalWorld


def _transactions(statements: list[str]) -> list[list[str]]:
    """The traced statements grouped by write transaction (BEGIN ... COMMIT/ROLLBACK)."""
    out: list[list[str]] = []
    current: list[str] | None = None
    for sql in statements:
        if sql.startswith("BEGIN"):
            current = [sql]
        elif current is not None:
            current.append(sql)
            if sql in ("COMMIT", "ROLLBACK"):
                out.append(current)
                current = None
    return out


def _connection(world: World) -> sqlite3.Connection:
    assert isinstance(world, LocalWorld) and world._db is not None
    return world._db


async def test_a_step_is_at_most_six_statements(tmp_path: Path) -> None:
    db = tmp_path / "w.db"
    async with LocalWorld(db, poll_interval=0.01) as world:  # one world, as when embedded
        client = wayline.Client(world)
        async with wayline.Worker(world, [flows.chain], settings=settings()):
            await (await client.start(flows.chain, 2)).result(timeout=30)
            traced: list[str] = []
            _connection(world).set_trace_callback(traced.append)
            handle = await client.start(flows.chain, 10)
            assert await handle.result(timeout=30) == sum(range(10))
            _connection(world).set_trace_callback(None)
        events = await world.list_events(handle.run_id)
    # every transaction that wrote this run's events: its creation, its steps, its end
    appends = [tx for tx in _transactions(traced) if any("INTO events" in s for s in tx)]
    assert [e.type for e in events].count(T.STEP_COMPLETED) == 10
    assert len(appends) <= 10 + 2, appends  # one per step, one to create, one to end
    assert max(len(tx) for tx in appends) <= 6, appends  # BEGIN and COMMIT included
    # no read of entity statuses or of the run's head inside a step's write (only the look
    # for a follower of every append, which decides whether the change feed is renumbered)
    reads = [
        s for tx in appends[1:] for s in tx if s.startswith("SELECT") and "feed_followers" not in s
    ]
    assert reads == [], reads


async def _started(world: World) -> str:
    run_id = new_run_id()
    created = NewEvent(T.RUN_CREATED, data={"workflow": "wf", "input": []})
    await world.append(run_id, [created], expected_seq=0)
    await world.append(run_id, [NewEvent(T.RUN_STARTED)], expected_seq=1)
    return run_id


async def test_concurrent_appends_share_commits_and_keep_their_own_errors(tmp_path: Path) -> None:
    db = tmp_path / "w.db"
    async with LocalWorld(db) as world, LocalWorld(db) as fresh:
        runs = [await _started(world) for _ in range(30)]
        begun: list[str] = []
        _connection(world).set_trace_callback(
            lambda sql: begun.append(sql) if sql.startswith("BEGIN") else None
        )

        def step(i: int) -> NewEvent:
            return NewEvent(T.STEP_CREATED, f"s{i}", {"stepName": "a", "input": []})

        async def one(i: int, run_id: str) -> list[object]:
            if i % 3 == 0:  # a stale writer: its own conflict
                return list(await world.append(run_id, [step(i)], expected_seq=1))
            if i % 3 == 1:  # an invalid transition: the run is already started
                return list(await world.append(run_id, [step(i), NewEvent(T.RUN_STARTED)]))
            return list(await world.append(run_id, [step(i)], expected_seq=2))

        outcomes = await asyncio.gather(
            *(one(i, r) for i, r in enumerate(runs)), return_exceptions=True
        )
        _connection(world).set_trace_callback(None)
        assert 1 <= len(begun) < len(runs)  # a failed append's transaction would count too
        for i, (run_id, outcome) in enumerate(zip(runs, outcomes, strict=True)):
            listed = await fresh.list_events(run_id)  # another connection, nothing cached
            if i % 3 == 0:
                assert isinstance(outcome, SequenceConflictError), outcome
                assert "at seq 2" in str(outcome)
                assert len(listed) == 2
            elif i % 3 == 1:
                assert isinstance(outcome, EntityConflictError), outcome
                assert len(listed) == 2  # nothing of the bad append, not even its first event
            else:
                assert isinstance(outcome, list) and [e.seq for e in outcome] == [3]  # type: ignore[attr-defined]
                assert [e.type for e in listed] == [T.RUN_CREATED, T.RUN_STARTED, T.STEP_CREATED]
                assert (await fresh.get_run(run_id)).last_seq == 3  # type: ignore[union-attr]


async def test_a_cached_head_is_checked_against_another_writer(tmp_path: Path) -> None:
    """Two worlds on one file are two processes: each one's cached view of a run is refused
    by the database once the other has appended, and the append lands after the other's."""
    db = tmp_path / "w.db"
    async with LocalWorld(db) as a, LocalWorld(db) as b:
        run_id = await _started(a)
        await b.append(run_id, [NewEvent(T.STEP_CREATED, "s1", {"stepName": "a", "input": []})])
        started = await a.append(run_id, [NewEvent(T.STEP_STARTED, "s1", {"attempt": 1})])
        assert [e.seq for e in started] == [4]
        with pytest.raises(SequenceConflictError):
            await b.append(run_id, [NewEvent(T.STEP_STARTED, "s1", {"attempt": 2})], expected_seq=3)
        with pytest.raises(EntityConflictError):  # b learns s1 is started, from the database
            await b.append(run_id, [NewEvent(T.STEP_CREATED, "s1", {"stepName": "a", "input": []})])
        assert [e.seq for e in await b.list_events(run_id)] == [1, 2, 3, 4]
        assert (await a.get_run(run_id)).last_seq == 4  # type: ignore[union-attr]


async def test_a_cancelled_append_is_not_written(tmp_path: Path) -> None:
    async with LocalWorld(tmp_path / "w.db") as world:
        lone, run_id = await _started(world), await _started(world)
        step = NewEvent(T.STEP_CREATED, "s1", {"stepName": "a", "input": []})
        first = asyncio.create_task(world.append(lone, [step]))
        task = asyncio.create_task(world.append(run_id, [step]))
        # both run in this turn: the first commits inline, the second is concurrent with it
        await asyncio.sleep(0)  # queued, not yet flushed
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert [e.seq for e in await first] == [3]
        assert [e.seq for e in await world.list_events(run_id)] == [1, 2]


async def test_a_lone_append_commits_without_a_turn_of_the_loop(tmp_path: Path) -> None:
    """Nothing else appends: the append is written before it returns, never suspended on a
    future that a flush in a later loop turn would resolve (SQLite's group commit)."""
    async with LocalWorld(tmp_path / "w.db") as world:
        run_id = await _started(world)
        await asyncio.sleep(0)  # a new turn: the previous append's turn is over
        step = NewEvent(T.STEP_CREATED, "s1", {"stepName": "a", "input": []})
        append = world.append(run_id, [step], expected_seq=2)
        with pytest.raises(StopIteration) as done:  # finished without suspending once
            append.send(None)
        assert [e.seq for e in done.value.value] == [3]
        assert [e.seq for e in await world.list_events(run_id)] == [1, 2, 3]


async def test_each_wave_of_concurrent_appends_shares_one_commit(tmp_path: Path) -> None:
    """Once a flush has served several appends, the next wave (the handlers its commit woke)
    is gathered whole: its first append is not sent ahead alone, which would cost a commit,
    and an fsync, of its own."""
    async with LocalWorld(tmp_path / "w.db") as world:
        runs = [await _started(world) for _ in range(10)]

        def step(i: int) -> NewEvent:
            return NewEvent(T.STEP_CREATED, f"s{i}", {"stepName": "a", "input": []})

        await asyncio.gather(*(world.append(r, [step(1)]) for r in runs))
        begun: list[str] = []
        _connection(world).set_trace_callback(
            lambda sql: begun.append(sql) if sql.startswith("BEGIN") else None
        )
        written = await asyncio.gather(*(world.append(r, [step(2)]) for r in runs))
        _connection(world).set_trace_callback(None)
        assert [[e.seq for e in w] for w in written] == [[4]] * len(runs)
        assert len(begun) == 1, begun


def _synchronous(world: World) -> int:
    return int(_connection(world).execute("PRAGMA synchronous").fetchone()[0])


def _modes(statements: list[str]) -> list[tuple[str, list[str]]]:
    """Each write transaction with the ``synchronous`` mode it committed under."""
    mode, out, current = "FULL", [], None
    for sql in statements:
        if sql.startswith("PRAGMA synchronous="):
            mode = sql.split("=", 1)[1]
        elif sql.startswith("BEGIN"):
            current = [sql]
        elif current is not None:
            current.append(sql)
            if sql in ("COMMIT", "ROLLBACK"):
                out.append((mode, current))
                current = None
    return out


async def test_only_queue_claims_settlements_and_starts_skip_their_fsync(tmp_path: Path) -> None:
    """On a durable world every append and every enqueue commits under FULL (fsync), but for
    three: a claim of a queue message and its ack commit under NORMAL (a crash that loses them
    only delivers the message again), and so does a start's message, written after its
    durable ``run_created`` (a worker re-arms a live run that lost it, the next test). The
    connection is FULL again afterwards."""
    async with LocalWorld(tmp_path / "w.db", poll_interval=0.01) as world:
        client = wayline.Client(world)
        async with wayline.Worker(world, [flows.chain], settings=settings()):
            await (await client.start(flows.chain, 1)).result(timeout=30)
            traced: list[str] = []
            _connection(world).set_trace_callback(traced.append)
            handle = await client.start(flows.chain, 3)
            assert await handle.result(timeout=30) == sum(range(3))
            await world.enqueue("elsewhere", {"n": 1}, idempotency_key="a-wake")
            _connection(world).set_trace_callback(None)
        mode = _connection(world).execute("PRAGMA synchronous").fetchone()[0]
    assert mode == 2  # FULL
    txs = _modes(traced)
    writes_events = [m for m, tx in txs if any("INTO events" in s for s in tx)]
    starts = [m for m, tx in txs if any("INTO messages" in s and ":start" in s for s in tx)]
    enqueues = [m for m, tx in txs if any("INTO messages" in s and "a-wake" in s for s in tx)]
    claims = [m for m, tx in txs if any(s.startswith("UPDATE messages SET attempts") for s in tx)]
    acks = [m for m, tx in txs if any(s.startswith("DELETE FROM messages") for s in tx)]
    assert writes_events and set(writes_events) == {"FULL"}, txs
    assert starts == ["NORMAL"], txs
    assert enqueues == ["FULL"], txs
    assert claims and set(claims) == {"NORMAL"}, txs
    assert acks and set(acks) == {"NORMAL"}, txs


async def test_a_start_whose_message_an_os_crash_lost_is_rearmed_by_the_next_worker(
    tmp_path: Path,
) -> None:
    """What an OS crash can lose of a start on a durable world: its queue message (committed
    without its own fsync), never its ``run_created``. Removed by hand here, as the crash
    would; the next worker to start re-arms the run and it completes."""
    async with LocalWorld(tmp_path / "w.db", poll_interval=0.01) as world:
        handle = await wayline.Client(world).start(flows.chain, 3)
        db = _connection(world)
        assert db.execute("DELETE FROM messages").rowcount == 1
        assert await world.runs_with_messages() == set()
        async with wayline.Worker(world, [flows.chain], settings=settings()):
            assert await handle.result(timeout=30) == sum(range(3))


async def test_each_settlement_skips_its_fsync_and_a_dead_letter_keeps_it(tmp_path: Path) -> None:
    async with LocalWorld(tmp_path / "w.db", poll_interval=0.01) as world:
        await world.enqueue("t", {"n": 1})
        traced: list[str] = []
        _connection(world).set_trace_callback(traced.append)
        modes: dict[str, set[str]] = {}

        def since(name: str, start: int) -> None:
            modes[name] = {m for m, _ in _modes(traced[start:])}

        for name in ("retry", "release", "renew", "ack"):
            if name != "ack":  # the ack settles the renewed delivery
                [got] = await world.receive("t", wait_seconds=5)
            start = len(traced)
            assert await getattr(world, name)(got)
            since(name, start)
        await world.enqueue("t", {"n": 2})
        [got] = await world.receive("t", wait_seconds=5)
        start = len(traced)
        assert await world.dead_letter(got, "a test")
        since("dead_letter", start)
        _connection(world).set_trace_callback(None)
    assert modes == {
        "retry": {"NORMAL"},
        "release": {"NORMAL"},
        "renew": {"NORMAL"},
        "ack": {"NORMAL"},
        "dead_letter": {"FULL"},
    }, traced


async def test_a_sync_normal_world_never_switches_modes(tmp_path: Path) -> None:
    async with LocalWorld(tmp_path / "w.db", poll_interval=0.01, synchronous="normal") as world:
        client = wayline.Client(world)
        traced: list[str] = []
        _connection(world).set_trace_callback(traced.append)
        async with wayline.Worker(world, [flows.chain], settings=settings()):
            assert await (await client.start(flows.chain, 2)).result(timeout=30) == 1
        _connection(world).set_trace_callback(None)
        mode = _connection(world).execute("PRAGMA synchronous").fetchone()[0]
    assert mode == 1  # NORMAL
    assert not [s for s in traced if s.startswith("PRAGMA synchronous")], traced


async def test_durable_by_default_and_sync_normal_opts_out(tmp_path: Path) -> None:
    full, normal = 2, 1  # PRAGMA synchronous values
    async with wayline.open_world(f"sqlite:///{tmp_path}/a.db") as world:
        assert isinstance(world, LocalWorld) and _synchronous(world) == full
    async with wayline.open_world(f"sqlite:///{tmp_path}/b.db?sync=normal") as world:
        assert isinstance(world, LocalWorld) and _synchronous(world) == normal
        assert world.path == tmp_path / "b.db"
    async with wayline.open_world(f"sqlite:///{tmp_path}/c.db?sync=FULL") as world:
        assert isinstance(world, LocalWorld) and _synchronous(world) == full


def test_sync_given_twice_is_a_clear_error(tmp_path: Path) -> None:
    """Which of two would apply is anyone's guess: neither does, and nothing is created."""
    with pytest.raises(ConfigurationError, match="given twice"):
        wayline.open_world(f"sqlite:///{tmp_path}/w.db?sync=normal&sync=full")
    assert not (tmp_path / "w.db").exists()


@pytest.mark.parametrize(
    ("query", "named"), [("sync=fast", "sync='fast'"), ("sync=", "sync=''"), ("fsync=1", "fsync")]
)
def test_a_bad_sync_option_is_a_clear_error(tmp_path: Path, query: str, named: str) -> None:
    url = f"sqlite:///{tmp_path}/w.db?{query}"
    with pytest.raises(ConfigurationError) as info:
        wayline.open_world(url)
    assert named in str(info.value) and "normal" in str(info.value)
    assert not (tmp_path / "w.db").exists()


def test_the_cli_reads_the_file_of_a_url_with_options(tmp_path: Path) -> None:
    assert sqlite_path("sqlite:///x/w.db?sync=normal") == Path("x/w.db")
    absolute = absolute_world_url("sqlite:///x/w.db?sync=normal")
    assert absolute.endswith("/x/w.db?sync=normal") and absolute.startswith("sqlite:////")


def test_a_bad_sync_option_is_named_before_a_missing_file(tmp_path: Path) -> None:
    """``wayline runs list --world 'sqlite:///missing.db?sync=bogus'``: the first mistake is
    the option, so it is the one named (it said only "no world at ..."); exit 2 either way."""
    import subprocess
    import sys

    url = f"sqlite:///{tmp_path}/missing.db?sync=bogus"
    done = subprocess.run(
        [sys.executable, "-m", "wayline.cli", "runs", "list", "--world", url],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    assert "sync='bogus'" in done.stderr and "no world at" not in done.stderr
    assert not (tmp_path / "missing.db").exists()


async def test_a_database_from_before_slot_tokens_is_migrated(tmp_path: Path) -> None:
    """A ``slots`` table without the ``token`` column (an older world's) gains it when opened;
    the holder an older worker wrote (no token) answers to any take, as it did."""
    db = tmp_path / "w.db"
    old = sqlite3.connect(db)
    old.execute(
        "CREATE TABLE slots (key TEXT NOT NULL, run_id TEXT NOT NULL, acquired_at REAL NOT NULL,"
        " expires_at REAL, PRIMARY KEY (key, run_id)) WITHOUT ROWID"
    )
    old.execute("INSERT INTO slots VALUES ('k', 'run1:s1', 0, 1e12)")
    old.commit()
    old.close()
    async with LocalWorld(db) as world:
        assert await world.acquire_slot("k", "run2:s1", 1, lease=30, token="b") == (
            False,
            ["run1:s1"],
        )
        assert await world.renew_slot("k", "run1:s1", lease=30, token="a")
        await world.release_slot("k", "run1:s1", token="a")
        assert (await world.acquire_slot("k", "run2:s1", 1, lease=30, token="b"))[0]
        await world.release_slot("k", "run2:s1", token="stale")  # another take's: a no-op
        assert await world.acquire_slot("k", "run3:s1", 1, lease=30) == (False, ["run2:s1"])


async def test_a_database_from_before_held_hand_backs_were_told_apart_is_migrated(
    tmp_path: Path,
) -> None:
    """A ``messages`` table without ``held_handbacks`` (an older world's) gains it when opened:
    a message stored then, handed back three times, has no held hand-backs, and its held
    hand-backs are counted from then on."""
    db = tmp_path / "w.db"
    async with LocalWorld(db) as world:
        mid = await world.enqueue("sqlite-writes.held", {"n": 0})
    old = sqlite3.connect(db)
    old.execute("ALTER TABLE messages DROP COLUMN held_handbacks")
    old.execute("UPDATE messages SET handbacks = 3, attempts = 3")
    old.commit()
    old.close()
    async with LocalWorld(db) as world:
        [d] = await world.receive("sqlite-writes.held", wait_seconds=1.0)
        assert (d.message_id, d.attempt, d.handbacks, d.held_handbacks) == (mid, 1, 3, 0)
        assert await world.release(d, held=True)
        [d] = await world.receive("sqlite-writes.held", wait_seconds=1.0)
        assert (d.attempt, d.handbacks, d.held_handbacks) == (1, 4, 1)
        assert await world.ack(d)


async def test_a_message_costs_two_statements_to_send_and_five_to_claim(tmp_path: Path) -> None:
    # The claim reads every priority level's longest-waiting message in one statement, and the
    # send works its fair tag out inside its INSERT: a statement is a round into SQLite that
    # every run pays for its start message, ten of them a claim when read one level at a time.
    async with LocalWorld(tmp_path / "w.db", poll_interval=0.01) as world:
        await world.enqueue("sqlite-writes.claim", {"n": 0})  # the topic's clock is written
        assert len(await world.receive("sqlite-writes.claim", wait_seconds=1.0)) == 1
        traced: list[str] = []
        _connection(world).set_trace_callback(traced.append)
        await world.enqueue("sqlite-writes.claim", {"n": 1})
        got = await world.receive("sqlite-writes.claim", wait_seconds=1.0)
        _connection(world).set_trace_callback(None)
    assert [d.payload["n"] for d in got] == [1]
    sends = [tx for tx in _transactions(traced) if any("INTO messages" in s for s in tx)]
    claims = [tx for tx in _transactions(traced) if any("UPDATE messages" in s for s in tx)]
    assert len(sends) == 1 and len(claims) == 1, _transactions(traced)
    # BEGIN, the message with its fair tag, its key's finish, COMMIT
    assert len(sends[0]) <= 4, sends
    # BEGIN, the levels' oldest, the level's pick, the clock, its passed keys, the hold, COMMIT
    assert len(claims[0]) <= 7, claims
