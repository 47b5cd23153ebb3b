"""A poisoned event-log entry fences one run: typed CORRUPT_LOG errors naming run, entry and
why; the run shows ``corrupt``; its deliveries are set aside, not retried; other runs carry
on; ``repair --drop-seq`` removes the entry and the run resumes. On both worlds."""

from __future__ import annotations

from functools import partial
from pathlib import Path

import pytest

import wayline
from tests.hostile import flows
from tests.hostile.poison import forge_event, is_local, poison_log
from tests.runtime.harness import Engine, wait_for
from wayline.errors import CorruptLogError
from wayline.world import FLOW_TOPIC

GARBAGE = [
    b"\xff\xfe\x00not utf-8",
    b"{not json",
    b"[1, 2, 3]",
    b'{"s": 1, "e": "x"}',
    b"[" * 50_000,
    b'{"s": ' + b"9" * 5000 + b"}",
    b'{"s":99,"e":[{"t":"run_completed","c":null,"d":{"output":1}}],"r":{}}',
    b'{"s":1,"e":[{"t":"run_created","c":null,"d":{}}],"r":{}}',
]


async def _hook_active(engine: Engine, token: str) -> bool:
    hook = await engine.world.get_hook(token)
    return hook is not None and hook.active


async def _a_poke_set_aside(world: wayline.World, run_id: str) -> list[dict[str, object]]:
    """Enqueue a delivery naming the run and wait until it is set aside with the run's
    CORRUPT_LOG as its reason; the dead letters that say so."""
    await world.enqueue(FLOW_TOPIC, {"runId": run_id, "reason": "poke"})

    async def set_aside() -> list[dict[str, object]]:
        return [
            d
            for d in await world.list_dead_letters()
            if "CORRUPT_LOG" in str(d["reason"]) and run_id in str(d["reason"])
        ]

    found: list[dict[str, object]] = await wait_for(set_aside)
    return found


@pytest.mark.parametrize("garbage", GARBAGE, ids=lambda g: repr(g[:12]))
async def test_a_poisoned_entry_fences_one_run_and_repair_resumes_it(
    engine: Engine, tmp_path: Path, garbage: bytes
) -> None:
    path = str(tmp_path / "count")
    async with engine.worker([flows.gated]):
        a = await engine.client.start(flows.gated, path, "tok-a")
        b = await engine.client.start(flows.gated, path, "tok-b")
        await wait_for(lambda: _hook_active(engine, "tok-a"))
        await wait_for(lambda: _hook_active(engine, "tok-b"))
        seq = await poison_log(engine.world, a.run_id, garbage)

        # typed errors naming run, entry and why, from every reader
        reader = await engine.make_world()  # a fresh process's view, nothing cached
        for world in (engine.world, reader):
            client = wayline.Client(world)
            with pytest.raises(CorruptLogError) as info:
                await client.get_run(a.run_id) if world is reader else await world.list_events(
                    a.run_id
                )
            assert info.value.run_id == a.run_id and info.value.seq == seq
            assert info.value.code == "CORRUPT_LOG" and info.value.why
            with pytest.raises(CorruptLogError):
                await client.resume_hook("tok-a", {"ok": 1})
            with pytest.raises(CorruptLogError):
                await client.cancel(a.run_id)
        listed = {r.run_id: r for r in await reader.list_runs()}
        assert listed[a.run_id].status is wayline.RunStatus.CORRUPT
        assert listed[b.run_id].status is wayline.RunStatus.RUNNING
        corrupt = await reader.list_runs(status=wayline.RunStatus.CORRUPT)
        assert [r.run_id for r in corrupt] == [a.run_id]

        # a delivery naming the run is set aside with the reason, once, not retried
        dead = await _a_poke_set_aside(engine.world, a.run_id)
        assert dead[0]["attempts"] == 1

        # the other run is untouched
        await engine.client.resume_hook("tok-b", "b-payload")
        assert await b.result(timeout=15) == "b-payload"

        # repair: a readable entry is refused, the poisoned one removed, the run resumes
        with pytest.raises(wayline.WaylineError):
            await engine.client.repair_run(a.run_id, seq - 1)
        done = await engine.client.repair_run(a.run_id, seq)
        assert any(str(seq) in line for line in done)
        assert (await wayline.Client(reader).get_run(a.run_id)).status is wayline.RunStatus.RUNNING
        await engine.client.resume_hook("tok-a", "a-payload")
        assert await a.result(timeout=15) == "a-payload"
    assert flows.count(path, "before") == 2 and flows.count(path, "after") == 2


async def test_open_hooks_lists_the_other_runs_hooks_past_a_poisoned_run(
    engine: Engine, tmp_path: Path
) -> None:
    """``wayline hooks list``: a poisoned run fences itself, not the hooks of every other run
    (asked for by its id, it still raises its CORRUPT_LOG)."""
    path = str(tmp_path / "count")
    async with engine.worker([flows.gated]):
        a = await engine.client.start(flows.gated, path, "tok-a")
        b = await engine.client.start(flows.gated, path, "tok-b")
        await wait_for(lambda: _hook_active(engine, "tok-a"))
        await wait_for(lambda: _hook_active(engine, "tok-b"))
        await poison_log(engine.world, a.run_id, b"{not json")
        client = wayline.Client(await engine.make_world())
        assert [h["token"] for h in await client.open_hooks()] == ["tok-b"]
        with pytest.raises(CorruptLogError):
            await client.open_hooks(a.run_id)
        await engine.client.resume_hook("tok-b", "b-payload")
        assert await b.result(timeout=15) == "b-payload"


async def _forge_step(engine: Engine, run_id: str) -> int:
    """A ``step_created`` that is JSON, and a valid transition, but whose ``occurrence`` is not
    a number: it passes every check but the typed read of its fields. Returns its entry."""
    import json
    import sqlite3

    events = await engine.world.list_events(run_id)
    data = {"stepName": "forged", "input": [], "occurrence": "zz"}
    if is_local(engine.world):  # a row of the log rewritten in place (its step's start)
        [created] = [e for e in events if e.type.value == "step_started"]
        db = sqlite3.connect(engine.world.path)  # type: ignore[attr-defined]
        try:
            db.execute(
                "UPDATE events SET data = ? WHERE run_id = ? AND seq = ?",
                (json.dumps({**created.data, "attempt": "x"}), run_id, created.seq),
            )
            db.commit()
        finally:
            db.close()
        return created.seq
    body = {"s": len(events) + 1, "e": [{"t": "step_created", "c": "s9", "d": data}], "r": {}}
    return await poison_log(engine.world, run_id, json.dumps(body).encode())


async def test_a_mistyped_field_fences_its_run_and_workers_still_start(
    engine: Engine, tmp_path: Path
) -> None:
    """An entry whose fields do not have their types is ``corrupt`` when read (it crashed every
    worker's start: recovery folded the log and met a bare ValueError), the other runs go on,
    and ``repair --drop-seq`` takes it out."""
    path = str(tmp_path / "count")
    async with engine.worker([flows.gated]):
        victim = await engine.client.start(flows.gated, path, "t-victim")
        other = await engine.client.start(flows.gated, path, "t-other")
        await wait_for(lambda: _hook_active(engine, "t-victim"), timeout=30)
        await wait_for(lambda: _hook_active(engine, "t-other"), timeout=30)
    seq = await _forge_step(engine, victim.run_id)
    reader = await engine.make_world()
    with pytest.raises(CorruptLogError) as info:
        await reader.list_events(victim.run_id)  # what every replay reads
    assert info.value.run_id == victim.run_id and "does not decode" in str(info.value)
    async with engine.worker([flows.gated], world=reader):  # recovery reads every live run
        await engine.client.resume_hook("t-other", "fine")
        assert await other.result(timeout=30) == "fine"
        await engine.client.repair_run(victim.run_id, seq)
        await engine.client.resume_hook("t-victim", "repaired")
        assert await victim.result(timeout=30) == "repaired"


FORGED_STEP = ("step_completed", {"output": "forged"}, "s-forged")
"""A step result for a step the run never created: it decodes, it does not follow."""


async def test_an_entry_that_does_not_follow_is_fenced_and_repair_removes_it(
    engine: Engine, tmp_path: Path
) -> None:
    """Only the check that each entry follows from the ones before it catches this entry. The
    fence's advice, ``repair --drop-seq N``, removes it on both worlds (SQLite refused it: it
    removed only entries that do not decode); any other entry is refused, naming where the
    log first fails, with nothing lost; the woken run goes on and completes."""
    path = str(tmp_path / "count")
    run = await engine.client.start(flows.gated, path, "t-forged")
    type_, data, cid = FORGED_STEP
    seq = await forge_event(engine.world, run.run_id, type_, data, cid=cid)
    reader = await engine.make_world()
    with pytest.raises(CorruptLogError) as info:
        await reader.list_events(run.run_id)  # what every replay reads
    assert info.value.seq == seq and "does not follow" in info.value.why
    assert f"--drop-seq {seq}" in str(info.value)
    async with engine.worker([flows.gated]):
        # its start is set aside: only the repair's wake can move the run on
        async def set_aside() -> bool:
            return any(run.run_id in str(d["reason"]) for d in await reader.list_dead_letters())

        await wait_for(set_aside)
        with pytest.raises(CorruptLogError) as again:  # without --drop-seq: the fence itself
            await engine.client.repair_run(run.run_id)
        assert again.value.seq == seq
        for wrong in (seq - 1, seq + 1):
            with pytest.raises(wayline.WaylineError) as refused:
                await engine.client.repair_run(run.run_id, wrong)
            assert not isinstance(refused.value, CorruptLogError)
            assert f"first fails at entry {seq}" in refused.value.message
        with pytest.raises(CorruptLogError) as still:  # refused: nothing changed
            await reader.list_events(run.run_id)
        assert still.value.seq == seq
        done = await engine.client.repair_run(run.run_id, seq)
        assert any(str(seq) in line for line in done) and "woke the run" in done
        await wait_for(lambda: _hook_active(engine, "t-forged"))
        await engine.client.resume_hook("t-forged", "after repair")
        assert await run.result(timeout=15) == "after repair"
    assert flows.count(path, "before") == 1 and flows.count(path, "after") == 1


async def test_repair_removes_two_bad_entries_one_after_the_other(
    engine: Engine, tmp_path: Path
) -> None:
    """Removing the first of two bad entries is kept, and the error names the next one, which
    the next repair removes (SQLite undid the removal when the rest of the log did not read,
    and then refused the entry it named: the first one failed first again)."""
    path = str(tmp_path / "count")
    async with engine.worker([flows.gated]):
        run = await engine.client.start(flows.gated, path, "t-two")
        await wait_for(lambda: _hook_active(engine, "t-two"))
        first = await poison_log(engine.world, run.run_id, b"{not json", move_last=True)
        await poison_log(engine.world, run.run_id, b"[1, 2, 3]", move_last=True)
        with pytest.raises(CorruptLogError) as next_bad:
            await engine.client.repair_run(run.run_id, first)
        # SQLite moves the later rows down one; a NATS stream keeps its sequence numbers
        assert next_bad.value.seq == (first if is_local(engine.world) else first + 1)
        reader = await engine.make_world()
        with pytest.raises(CorruptLogError) as fenced:  # the first is gone, the second fences
            await reader.list_events(run.run_id)
        assert fenced.value.seq == next_bad.value.seq and "not JSON" not in fenced.value.why
        await engine.client.repair_run(run.run_id, next_bad.value.seq)
        await engine.client.resume_hook("t-two", "both gone")
        assert await run.result(timeout=15) == "both gone"
    assert flows.count(path, "before") == 1 and flows.count(path, "after") == 1


async def test_a_forged_lift_out_of_an_unwind_fences_the_run_and_repair_resumes_it(
    engine: Engine, tmp_path: Path
) -> None:
    """A ``run_unblocked`` written behind the world's back that lifts a block put over an
    unwind back to ``running`` (the run could then complete without its reversals) does not
    follow from the log, whose block records ``compensating``: every reader is fenced
    (CORRUPT_LOG at that entry), deliveries are set aside, and ``repair --drop-seq`` takes it
    out with nothing else lost: a worker lifts the block and the unwind ends the run. The
    forged lift was taken, whatever status it recorded."""
    from tests.runtime import flows as runtime_flows
    from wayline._core.events import EventType, NewEvent

    log, world = str(tmp_path / "log"), engine.world
    flag = tmp_path / runtime_flows.STUCK_FLAG
    flag.touch()

    async def status(want: wayline.RunStatus) -> bool:
        return await engine.client.handle(run_id).status() is want

    async with engine.worker([runtime_flows.saga_stuck]):
        run_id = (await engine.client.start(runtime_flows.saga_stuck, log, "o1")).run_id
        await wait_for(lambda: status(wayline.RunStatus.COMPENSATION_STUCK))
    await engine.client.resume_compensation(run_id)  # no worker: the unwind waits
    aside = {"code": "DEFINITION_MISMATCH", "message": "another definition"}
    await world.append(run_id, [NewEvent(EventType.RUN_BLOCKED, data=aside)])
    before = [(e.seq, e.type, dict(e.data)) for e in await world.list_events(run_id)]
    assert before[-1][2]["statusBefore"] == "compensating"
    seq = await forge_event(world, run_id, "run_unblocked", {"status": "running"}, "running")

    reader = await engine.make_world()  # a fresh process's view, nothing cached
    for each in (world, reader):
        with pytest.raises(CorruptLogError, match="blocked over compensating") as info:
            await each.read_run(run_id)  # what every replay reads
        assert info.value.run_id == run_id and info.value.seq == seq
        assert info.value.code == "CORRUPT_LOG"
    flag.unlink()
    async with engine.worker([runtime_flows.saga_stuck], world=reader):
        await _a_poke_set_aside(engine.world, run_id)
        await engine.client.repair_run(run_id, seq)
        with pytest.raises(wayline.RunFailedError, match="no courier"):
            await engine.client.handle(run_id).result(timeout=20)
    events = await reader.list_events(run_id)
    assert [(e.seq, e.type, dict(e.data)) for e in events[: len(before)]] == before
    lifts = [e.data for e in events if e.type is EventType.RUN_UNBLOCKED]
    assert lifts == [{"status": "compensating"}]
    assert runtime_flows.lines(log) == ["reserve o1", "ship o1"] + ["try release o1"] * 2


@pytest.mark.parametrize(
    ("before", "written", "status"),
    [
        ([], ("run_started", {}), wayline.RunStatus.RUNNING),
        ([("run_compensating", {})], ("run_completed", {"output": 1}), wayline.RunStatus.COMPLETED),
    ],
    ids=["second-start", "end-over-unwind"],
)
async def test_a_start_or_an_end_over_a_block_the_version_before_wrote_still_reads(
    engine: Engine,
    before: list[tuple[str, dict[str, object]]],
    written: tuple[str, dict[str, object]],
    status: wayline.RunStatus,
) -> None:
    """The version before appended a start over any block (a second delivery's deferred
    start, after a concurrency slot blocked the first), and an end over a block put on an
    unwind. This version refuses both appends, but a log holding one is not corrupt: fencing
    it would stop a live run after an upgrade. Only the world's own appends are judged by the
    status under the block."""
    from wayline._core.events import EventType, NewEvent
    from wayline.errors import EntityConflictError

    world = engine.world
    run_id = (await engine.client.start(flows.gated, "unused", "t-old")).run_id
    await world.append(run_id, [NewEvent(EventType.RUN_STARTED)])
    for type_, data in before:
        await world.append(run_id, [NewEvent(EventType(type_), data=data)])
    aside = {"code": "CONCURRENCY_LIMIT", "message": "waiting for a slot"}
    await world.append(run_id, [NewEvent(EventType.RUN_BLOCKED, data=aside)])
    with pytest.raises(EntityConflictError, match="it is blocked over"):
        await world.append(run_id, [NewEvent(EventType(written[0]), data=written[1])])
    seq = await forge_event(world, run_id, written[0], written[1], str(status))
    reader = await engine.make_world()  # a fresh process's view, nothing cached
    for each in (world, reader):
        info, events = await each.get_run(run_id), await each.list_events(run_id)
        assert info is not None and info.status is status
        assert events[-1].seq == seq and events[-1].type is EventType(written[0])


async def test_a_row_deleted_from_a_sqlite_log_is_a_gap_that_repair_closes(tmp_path: Path) -> None:
    """A row deleted from the SQLite file leaves a gap in the seqs. The fence names the
    missing entry and advises ``--drop-seq N``, which answered "no event N": now it closes
    the gap (the event is gone already) and keeps every other event, in order. NATS has no
    such gap to close: a run's messages carry their own numbers."""
    import sqlite3

    from wayline._core.events import EventType

    world = wayline.open_world(f"sqlite:///{tmp_path / 'w.db'}")
    client = wayline.Client(world)
    async with world, wayline.Worker(world, [flows.gated]):
        run = await client.start(flows.gated, str(tmp_path / "count"), "t-gap")

        async def waiting() -> bool:
            hook = await world.get_hook("t-gap")
            return hook is not None and hook.active

        await wait_for(waiting)
        await client.resume_hook("t-gap", "in")
        assert await run.result(timeout=15) == "in"
    async with world:
        before = await world.list_events(run.run_id)
        gone = next(e for e in before if e.type is EventType.HOOK_RECEIVED)
        db = sqlite3.connect(tmp_path / "w.db")
        with db:
            db.execute("DELETE FROM events WHERE run_id = ? AND seq = ?", (run.run_id, gone.seq))
        db.close()
        with pytest.raises(CorruptLogError) as fenced:
            await world.list_events(run.run_id)
        assert fenced.value.seq == gone.seq and f"--drop-seq {gone.seq}" in str(fenced.value)
        with pytest.raises(wayline.WaylineError, match=f"first fails at entry {gone.seq}"):
            await client.repair_run(run.run_id, gone.seq + 1)
        done = await client.repair_run(run.run_id, gone.seq)
        assert any("closed the gap" in line for line in done), done
        after = await world.list_events(run.run_id)
        kept = [(e.type, e.correlation_id, e.data) for e in before if e.seq != gone.seq]
        assert [(e.type, e.correlation_id, e.data) for e in after] == kept
        assert [e.seq for e in after] == list(range(1, len(kept) + 1))
        assert (await client.get_run(run.run_id)).status is wayline.RunStatus.COMPLETED

        # a row written past the run's end with a hole before it is not a gap to close: it
        # was never part of the log, and repair removes it (a review found it kept, as the
        # event the hole stood for)
        last = len(after)
        db = sqlite3.connect(tmp_path / "w.db")
        with db:
            db.execute(
                "INSERT INTO events (run_id, seq, type, cid, data, created_at) "
                "VALUES (?, ?, 'run_cancel_requested', NULL, '{}', 0)",
                (run.run_id, last + 2),
            )
        db.close()
        with pytest.raises(CorruptLogError) as fenced:
            await world.list_events(run.run_id)
        assert fenced.value.seq == last + 1
        done = await client.repair_run(run.run_id, last + 1)
        assert f"removed event {last + 2}, past the run's last event {last}" in done, done
        again = await world.list_events(run.run_id)
        assert [(e.seq, e.type, e.data) for e in again] == [(e.seq, e.type, e.data) for e in after]


def _delete_rows(db_path: Path, run_id: str, *seqs: int) -> None:
    """Event rows deleted from the SQLite file, as any process with it open could."""
    import sqlite3

    db = sqlite3.connect(db_path)
    with db:
        db.executemany(
            "DELETE FROM events WHERE run_id = ? AND seq = ?", [(run_id, s) for s in seqs]
        )
    db.close()


async def test_the_last_row_deleted_from_a_sqlite_log_is_fenced_and_repair_closes_it(
    tmp_path: Path,
) -> None:
    """The run's last row deleted from the SQLite file of a waiting run: its rows end before
    the run's ``last_seq``. Every reader read the one event fewer as the whole log (a worker
    replayed it, a plain repair rebuilt the run from it). Now it is fenced as a gap is: the
    error names the missing entry and advises ``--drop-seq N``; a delivery is set aside and
    nothing is appended; the repair closes it (the run's row ends at the last row left, with
    the status that log folds to) and the woken run completes, no step running twice."""
    from wayline.world import fold_run

    file, path = tmp_path / "w.db", str(tmp_path / "count")
    world = wayline.open_world(f"sqlite:///{file}")
    client = wayline.Client(world)
    async with world:
        async with wayline.Worker(world, [flows.gated]):
            run = await client.start(flows.gated, path, "t-end")
            await wait_for(lambda: _hook_active_in(world, "t-end"))
        before = await world.list_events(run.run_id)
        gone = before[-1].seq
        _delete_rows(file, run.run_id, gone)

        reader = wayline.open_world(f"sqlite:///{file}")  # a fresh process's view
        async with reader:
            for each in (world, reader):
                for read in (
                    partial(each.list_events, run.run_id),
                    partial(each.list_events, run.run_id, after_seq=gone - 2),  # a suffix
                    partial(each.get_run, run.run_id),
                ):
                    with pytest.raises(CorruptLogError) as fenced:
                        await read()
                    assert fenced.value.run_id == run.run_id and fenced.value.seq == gone
                    assert f"`wayline runs repair {run.run_id} --drop-seq {gone}`" in str(
                        fenced.value
                    )
                # a suffix read past what is stored (the reader has seen it all) is no fence
                assert await each.list_events(run.run_id, after_seq=gone) == []
            listed = {r.run_id: r for r in await reader.list_runs()}
            assert listed[run.run_id].status is wayline.RunStatus.CORRUPT
        with pytest.raises(CorruptLogError) as plain:  # without --drop-seq: the fence itself
            await client.repair_run(run.run_id)
        assert plain.value.seq == gone
        with pytest.raises(wayline.WaylineError, match=f"first fails at entry {gone}"):
            await client.repair_run(run.run_id, gone - 1)

        async with wayline.Worker(world, [flows.gated]):
            dead = await _a_poke_set_aside(world, run.run_id)
            assert dead[0]["attempts"] == 1
            with pytest.raises(CorruptLogError):  # nothing was appended over the hole
                await world.list_events(run.run_id)

            done = await client.repair_run(run.run_id, gone)
            assert f"closed the gap of 1 deleted event(s) at {gone}, the log's end" in done
            assert "woke the run" in done
            after = await world.list_events(run.run_id)
            assert [(e.seq, e.type, e.data) for e in after[: gone - 1]] == [
                (e.seq, e.type, e.data) for e in before[:-1]
            ]
            info = await client.get_run(run.run_id)
            folded = None
            for ev in after:
                folded = fold_run(folded, ev)
            assert folded is not None and info.status is folded.status
            assert info.last_seq == after[-1].seq
            await wait_for(lambda: _hook_active_in(world, "t-end"))
            await client.resume_hook("t-end", "closed")
            assert await run.result(timeout=15) == "closed"
    assert flows.count(path, "before") == 1 and flows.count(path, "after") == 1


async def test_the_end_row_deleted_from_an_ended_sqlite_run_is_fenced(tmp_path: Path) -> None:
    """A completed run whose ``run_completed`` row is deleted: its row says completed, its
    log does not end. ``get_run`` (all a late delivery reads of an ended run) and the list
    fence it, naming the missing entry; the repair closes it, the run's row says what the
    log folds to (running) and the woken run ends again from its log, no step running twice."""
    from wayline._core.events import EventType

    file, path = tmp_path / "w.db", str(tmp_path / "count")
    world = wayline.open_world(f"sqlite:///{file}")
    client = wayline.Client(world)
    async with world, wayline.Worker(world, [flows.gated]):
        run = await client.start(flows.gated, path, "t-ended")
        await wait_for(lambda: _hook_active_in(world, "t-ended"))
        await client.resume_hook("t-ended", "first")
        assert await run.result(timeout=15) == "first"
        before = await world.list_events(run.run_id)
        assert before[-1].type is EventType.RUN_COMPLETED
        gone = before[-1].seq
        _delete_rows(file, run.run_id, gone)

        for read in (lambda: world.get_run(run.run_id), lambda: world.list_events(run.run_id)):
            with pytest.raises(CorruptLogError) as fenced:
                await read()
            assert fenced.value.seq == gone and f"--drop-seq {gone}" in str(fenced.value)
        corrupt = await world.list_runs(status=wayline.RunStatus.CORRUPT)
        assert [r.run_id for r in corrupt] == [run.run_id]

        done = await client.repair_run(run.run_id, gone)
        assert "woke the run" in done, done
        assert await client.handle(run.run_id).result(timeout=15) == "first"
        after = await world.list_events(run.run_id)
        assert [(e.seq, e.type) for e in after] == [(e.seq, e.type) for e in before]
    assert flows.count(path, "before") == 1 and flows.count(path, "after") == 1


async def _hook_active_in(world: wayline.World, token: str) -> bool:
    hook = await world.get_hook(token)
    return hook is not None and hook.active


async def test_reads_beside_another_connections_appends_never_see_rows_missing(
    tmp_path: Path,
) -> None:
    """A run's rows and its ``last_seq`` are read from one snapshot: while another connection
    (a thread here, with its own world) appends 200 steps, one commit each, reads of the
    whole log, of suffixes and of the run's row never fence and always end at the run's end.
    Read apart, a commit between the two reads pairs the rows with a later ``last_seq``, which
    the check that a log's rows reach its run's end takes for deleted rows."""
    import asyncio
    import threading

    from wayline._core.events import EventType, NewEvent
    from wayline._core.ids import new_run_id

    url = f"sqlite:///{tmp_path / 'w.db'}?sync=normal"
    run_id = new_run_id()
    created = {"workflow": "w", "input": {"args": []}}
    begun = [NewEvent(EventType.RUN_CREATED, data=created), NewEvent(EventType.RUN_STARTED)]
    async with wayline.open_world(url) as world:
        await world.append(run_id, begun)

    async def write() -> None:
        async with wayline.open_world(url) as writer:
            for i in range(200):
                cid, data = f"s{i}", {"stepName": "step", "input": {"args": []}, "occurrence": i}
                for new in (
                    NewEvent(EventType.STEP_CREATED, cid, data),
                    NewEvent(EventType.STEP_STARTED, cid, {"attempt": 1}),
                    NewEvent(EventType.STEP_COMPLETED, cid, {"result": i}),
                ):
                    await writer.append(run_id, [new])

    failed: list[BaseException] = []
    thread = threading.Thread(target=lambda: _run_catching(write(), failed))
    reads = 0
    async with wayline.open_world(url) as reader:
        thread.start()
        seen = 2
        while thread.is_alive():
            events = await reader.list_events(run_id)
            assert [e.seq for e in events] == list(range(1, len(events) + 1))
            suffix = await reader.list_events(run_id, after_seq=seen)
            assert [e.seq for e in suffix] == list(range(seen + 1, seen + 1 + len(suffix)))
            seen = max(seen, len(events), suffix[-1].seq if suffix else 0)
            info = await reader.get_run(run_id)
            assert info is not None and info.last_seq >= len(events)
            reads += 1
            await asyncio.sleep(0)
        thread.join()
        assert not failed, failed
        assert len(await reader.list_events(run_id)) == 2 + 600
    assert reads > 20


def _run_catching(coro: object, failed: list[BaseException]) -> None:
    import asyncio

    try:
        asyncio.run(coro)  # type: ignore[arg-type]
    except BaseException as err:  # reported by the test's thread
        failed.append(err)


async def test_a_sqlite_run_whose_every_row_was_deleted_can_be_repaired(tmp_path: Path) -> None:
    """All of a run's rows deleted from the file, its row left (``last_seq`` 2): a whole read
    returned no events, as for a run that does not exist, while a suffix read fenced it. Now
    it is fenced at entry 1 and names ``wayline runs repair RUN --drop-seq 1`` as the way out;
    that raised RUN_NOT_FOUND, as did a repair without ``--drop-seq``."""
    from wayline._core.events import EventType as T
    from wayline._core.events import NewEvent
    from wayline._core.ids import new_run_id

    file = tmp_path / "w.db"
    world = wayline.open_world(f"sqlite:///{file}")
    async with world:
        run_id = new_run_id()
        await world.append(run_id, [NewEvent(T.RUN_CREATED, data={"workflow": "wf", "input": {}})])
        await world.append(run_id, [NewEvent(T.RUN_STARTED)])
        _delete_rows(file, run_id, 1, 2)
        with pytest.raises(CorruptLogError) as info:
            await world.list_events(run_id)
        assert info.value.seq == 1 and "--drop-seq 1" in info.value.message
        with pytest.raises(CorruptLogError):  # a plain repair names the fence
            await world.repair_run(run_id)
        with pytest.raises(wayline.WaylineError, match="first fails at entry 1"):
            await world.repair_run(run_id, 2)
        done = await wayline.Client(world).repair_run(run_id, 1)
        assert done == ["removed the run: none of its events is left"]
        assert await world.list_events(run_id) == []  # fenced no more: no such run
        assert await world.get_run(run_id) is None
