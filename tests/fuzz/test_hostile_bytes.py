"""Hostile bytes in every store a world reads, while real runs proceed (issue: "no run is
wedged by another's data").

For each store, Hypothesis draws random and structured garbage (``strategies.py``); each case
is written behind the world's back, next to live runs, and then: no worker exits, runs that
were not written to are untouched and complete, every affected run is ``corrupt`` (and comes
back after ``repair``) or completes, and every error a reader meets is a typed WaylineError.
``WAYLINE_FUZZ_CASES`` sets the cases per store (default 12, to keep ``make test`` short); the
outcomes per store are printed at the end of the session (``-s``) and written to
``$WAYLINE_FUZZ_REPORT`` when set.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import strategies as st

import wayline
from tests.fuzz import strategies as gen
from tests.hostile import flows
from tests.hostile.poison import is_local, poison_hook, poison_idem, poison_log
from tests.runtime.harness import Engine, wait_for
from wayline.errors import CorruptEntryError, CorruptLogError, WaylineError
from wayline.world import FLOW_TOPIC, World

N = int(os.environ.get("WAYLINE_FUZZ_CASES", "12"))
REPORT: dict[str, Counter[str]] = {}


@pytest.fixture(scope="module", autouse=True)
def report() -> Iterator[None]:
    yield
    lines = [
        f"{store}: {sum(c.values())} cases -> {dict(c)}" for store, c in sorted(REPORT.items())
    ]
    print("\nhostile-bytes fuzz report\n  " + "\n  ".join(lines))
    target = os.environ.get("WAYLINE_FUZZ_REPORT")
    if target:
        Path(target).write_text(json.dumps({k: dict(v) for k, v in REPORT.items()}, indent=2))


def _note(store: str, world: World, outcome: str) -> None:
    REPORT.setdefault(f"{store} ({'sqlite' if is_local(world) else 'nats'})", Counter())[
        outcome
    ] += 1


def _alive(worker: wayline.Worker) -> None:
    assert worker.failure is None
    assert all(not t.done() for t in worker._tasks), "a worker task exited"


async def _typed(call: Any) -> Any:
    """Run a reader call; anything but a WaylineError is a bug."""
    try:
        return await call
    except WaylineError as err:
        return err


async def _waiting(engine: Engine, token: str) -> bool:
    hook = await _typed(engine.world.get_hook(token))
    return not isinstance(hook, WaylineError) and hook is not None and hook.active


async def _bystanders(engine: Engine, path: str) -> tuple[Any, Any]:
    """A run waiting on a hook, and a chain that runs while the garbage lands."""
    waiting = await engine.client.start(flows.gated, path, f"by-{uuid.uuid4().hex[:6]}")
    chain = await engine.client.start(flows.chain_of, 6)
    return waiting, chain


async def _bystanders_fine(engine: Engine, waiting: Any, chain: Any) -> None:
    assert await chain.result(timeout=30) == 6
    token = (await engine.world.list_events(waiting.run_id))[-1].data.get("token")
    assert token, "the bystander should be waiting on its hook"
    await engine.client.resume_hook(str(token), "by")
    assert await waiting.result(timeout=30) == "by"


# --- event logs ------------------------------------------------------------------------------
async def test_event_log_garbage(engine: Engine, tmp_path: Path) -> None:
    path = str(tmp_path / "count")
    body = gen.garbage(gen.event_bodies(st.integers(1, 12)))
    samples = gen.cases(body, N)
    async with engine.worker([flows.gated, flows.chain_of]) as worker:
        waiting, chain = await _bystanders(engine, path)
        victims = [await engine.client.start(flows.gated, path, f"v{i}") for i in range(N)]
        for i in range(N):
            await wait_for(lambda i=i: _waiting(engine, f"v{i}"), timeout=30)
        seqs = [
            await poison_log(engine.world, v.run_id, data)
            for v, data in zip(victims, samples, strict=True)
        ]
        reader = await engine.make_world()
        outcomes: list[str] = []
        for v in victims:
            got = await _typed(reader.get_run(v.run_id))
            if isinstance(got, CorruptLogError):
                assert got.run_id == v.run_id
                outcomes.append("corrupt")
            else:
                assert not isinstance(got, WaylineError), got
                outcomes.append("accepted")
            await engine.world.enqueue(FLOW_TOPIC, {"runId": v.run_id, "reason": "fuzz"})
        await _bystanders_fine(engine, waiting, chain)
        for i, (v, seq, outcome) in enumerate(zip(victims, seqs, outcomes, strict=True)):
            if outcome == "corrupt":
                await engine.client.repair_run(v.run_id, seq)
            resumed = await _typed(engine.client.resume_hook(f"v{i}", i))
            if isinstance(resumed, WaylineError):  # the forged entry ended the run or its hook
                assert outcome == "accepted", resumed
                info = await engine.client.get_run(v.run_id)
                _note("event log", engine.world, f"accepted, then {info.status}")
                continue
            assert await v.result(timeout=30) == i
            _note("event log", engine.world, f"{outcome}, then completed")
        _alive(worker)


# --- hook tokens -----------------------------------------------------------------------------
async def test_hook_store_garbage(engine: Engine, tmp_path: Path) -> None:
    path = str(tmp_path / "count")
    tokens = [f"h{i}" for i in range(N)]
    samples = [gen.cases(gen.garbage(gen.hook_entries(t)), 1)[0] for t in tokens]
    async with engine.worker([flows.gated, flows.chain_of]) as worker:
        waiting, chain = await _bystanders(engine, path)
        for token, data in zip(tokens, samples, strict=True):
            await poison_hook(engine.world, token, data)
            err = await _typed(engine.client.resume_hook(token, 0))
            assert isinstance(err, WaylineError), "a payload was delivered to garbage"
            kind = "typed CORRUPT_ENTRY" if isinstance(err, CorruptEntryError) else err.code
            runs = await engine.client.start(flows.gated, path, token)
            await wait_for(lambda t=token: _waiting(engine, t), timeout=30)
            await engine.client.resume_hook(token, token)
            assert await runs.result(timeout=30) == token
            _note("hook tokens", engine.world, f"{kind}; claimant overwrote it, completed")
        await _bystanders_fine(engine, waiting, chain)
        _alive(worker)


# --- idempotency keys (NATS: a KV bucket; SQLite keeps them on the message row) ---------------
async def test_idempotency_store_garbage(engine: Engine, tmp_path: Path) -> None:
    if is_local(engine.world):
        pytest.skip("SQLite keeps idempotency keys as a column of the message row itself")
    from wayline._core.ids import new_run_id

    path = str(tmp_path / "count")
    samples = gen.cases(gen.garbage(gen.idem_entries()), N)
    async with engine.worker([flows.gated, flows.chain_of]) as worker:
        for i, data in enumerate(samples):
            run_id = new_run_id()
            await poison_idem(engine.world, f"{run_id}:start", data)
            run = await engine.client.start_with(
                wayline.StartOptions(run_id=run_id), flows.chain_of, i + 1
            )
            assert await run.result(timeout=30) == i + 1
            _note("idempotency keys", engine.world, "overwritten by the enqueue, completed")
        _alive(worker)
    assert flows.count(path, "before") == 0


# --- queue subjects ----------------------------------------------------------------------------
async def test_queue_garbage(engine: Engine, tmp_path: Path) -> None:
    path = str(tmp_path / "count")
    async with engine.worker([flows.gated, flows.chain_of]) as worker:
        waiting, chain = await _bystanders(engine, path)
        known = [waiting.run_id, chain.run_id, "wf_" + "0" * 32]
        samples = gen.cases(gen.garbage(gen.queue_payloads(known)), N)
        for topic in ("flow", "step"):
            for data in samples:
                await _poison_queue(engine.world, topic, data)
        await _bystanders_fine(engine, waiting, chain)

        async def drained() -> bool:
            return await _queued(engine.world) == 0

        await wait_for(drained, timeout=60)
        dead = await engine.world.list_dead_letters(limit=10_000)
        for d in dead:
            reason = str(d["reason"])
            kind = "unknown run" if "for unknown run" in reason else reason.split(" (")[0]
            _note("queue subjects", engine.world, f"set aside: {kind[:40]}")
        for _ in range(2 * N - len(dead)):  # well-formed enough to act on: a wake, acked
            _note("queue subjects", engine.world, "acted on (a wake naming a known run)")
        _alive(worker)


async def _poison_queue(world: World, topic: str, data: bytes) -> None:
    if isinstance(world, wayline.LocalWorld):
        db = sqlite3.connect(world.path)
        try:
            db.execute(
                "INSERT INTO messages (topic, payload, available_at, created_at) VALUES (?,?,?,?)",
                (topic, data, time.time(), time.time()),
            )
            db.commit()
        finally:
            db.close()
        return
    import nats

    nc = await nats.connect(world._options.servers)  # type: ignore[attr-defined]
    try:
        subject = world.names.target_subject(topic, uuid.uuid4().hex)  # type: ignore[attr-defined]
        await nc.jetstream().publish(subject, data)
    finally:
        await nc.close()


async def _queued(world: World) -> int:
    if isinstance(world, wayline.LocalWorld):
        db = sqlite3.connect(world.path)
        try:
            (n,) = db.execute(
                "SELECT COUNT(*) FROM messages WHERE available_at <= ?", (time.time() + 60,)
            ).fetchone()
        finally:
            db.close()
        return int(n)
    import nats
    from wayline.worlds.nats.names import consumer_name

    nc = await nats.connect(world._options.servers)  # type: ignore[attr-defined]
    try:
        total = 0
        for topic in ("flow", "step"):
            info = await nc.jetstream().consumer_info(
                world.names.queue_stream,  # type: ignore[attr-defined]
                consumer_name(topic),
            )
            total += int(info.num_pending + info.num_ack_pending)
        return total
    finally:
        await nc.close()


# --- SQLite rows ---------------------------------------------------------------------------------
async def test_sqlite_row_garbage(engine: Engine, tmp_path: Path) -> None:
    if not is_local(engine.world):
        pytest.skip("SQLite rows")
    assert isinstance(engine.world, wayline.LocalWorld)
    path = str(tmp_path / "count")
    values = gen.cases(gen.garbage(gen.json_values()), N)
    columns = ["status", "input", "attributes", "error", "data"]
    async with engine.worker([flows.gated, flows.chain_of]) as worker:
        waiting, chain = await _bystanders(engine, path)
        for i, data in enumerate(values):
            token = f"r{i}"
            run = await engine.client.start(flows.gated, path, token)
            await wait_for(lambda t=token: _waiting(engine, t), timeout=30)
            column = columns[i % len(columns)]
            _tamper(engine.world.path, run.run_id, column, data)
            got = await _typed(engine.world.get_run(run.run_id))
            events = await _typed(engine.world.list_events(run.run_id))
            broken = next((e for e in (got, events) if isinstance(e, WaylineError)), None)
            if broken is not None:
                assert isinstance(broken, CorruptLogError), broken
                drop = broken.seq if broken.store == "events table" and column == "data" else None
                repaired = await _typed(engine.client.repair_run(run.run_id, drop))
                outcome = f"{column}: corrupt, repair " + (
                    "refused" if isinstance(repaired, WaylineError) else "ok"
                )
                if isinstance(repaired, WaylineError):
                    _note("sqlite rows", engine.world, outcome)
                    continue
            else:
                outcome = f"{column}: read as a value"
            # a repair that dropped the hook's creation: the woken run creates it again
            await wait_for(lambda t=token: _waiting(engine, t), timeout=30)
            resumed = await _typed(engine.client.resume_hook(token, i))
            if isinstance(resumed, WaylineError):
                _note("sqlite rows", engine.world, f"{outcome}; resume: {resumed.code}")
                continue
            result = await _typed(run.result(timeout=30))
            end = "completed" if result == i else getattr(result, "code", repr(result)[:30])
            _note("sqlite rows", engine.world, f"{outcome}, then {end}")
        await _bystanders_fine(engine, waiting, chain)
        _alive(worker)


def _tamper(db_path: Path, run_id: str, column: str, data: bytes) -> None:
    db = sqlite3.connect(db_path)
    try:
        if column == "data":  # an existing event's data: the hook_created one
            db.execute(
                "UPDATE events SET data = ? WHERE run_id = ? AND type = 'hook_created'",
                (data, run_id),
            )
        else:
            db.execute(f"UPDATE runs SET {column} = ? WHERE run_id = ?", (data, run_id))
        db.commit()
    finally:
        db.close()
