"""A cancelled parent passes the cancel on to its children, under concurrency and crashes:
every child ends cancelled, every completed step is compensated once, innermost first, and
the parent ends last."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import wayline
from tests.runtime import flows
from tests.runtime.harness import Engine, of_type, settings, wait_for
from wayline._core.events import EventType

pytestmark = pytest.mark.partitioned  # docs/nats.md, "Partitions"

N = 5


@wayline.workflow
async def sleepy_kid(path: str, name: str) -> str:
    await flows.charge_card(path, name)
    await wayline.sleep(3600)
    return name


@wayline.workflow
async def fan_parent(path: str, n: int) -> list[object]:
    await flows.reserve(path, "parent")
    return await wayline.gather(*[wayline.child(sleepy_kid, path, f"k{i}") for i in range(n)])


@wayline.workflow
async def middle(path: str) -> str:
    await flows.charge_card(path, "middle")
    return await wayline.child(sleepy_kid, path, "grand")


@wayline.workflow
async def top(path: str) -> str:
    await flows.reserve(path, "top")
    return await wayline.child(middle, path)


@wayline.workflow
async def hook_kid(path: str, token: str) -> object:
    await flows.charge_card(path, "kid")
    return await wayline.create_hook(token)


@wayline.workflow
async def racing_parent(path: str, token: str) -> object:
    await flows.reserve(path, "parent")
    got = await wayline.child(hook_kid, path, token)
    await wayline.sleep(3600)
    return got


@wayline.workflow
async def catching_parent(path: str) -> str:
    try:
        return await wayline.child(sleepy_kid, path, "kid")
    except wayline.ChildFailedError as err:
        return f"child {err.status}"


ALL = [fan_parent, sleepy_kid, middle, top, hook_kid, racing_parent, catching_parent]


def _marks(path: str) -> list[str]:
    return [line.split(" key=")[0] for line in flows.lines(path)]


def _check_ledger(path: str, parent_marks: tuple[str, str]) -> None:
    """Each charged child refunded exactly once, after its charge (a charge whose delivery
    died mid-body runs again under its key: at least once); the parent's own forward step
    first and its compensation last. A refund without a charge is one whose forward outcome
    was unknown (its step started, then its worker died before the body recorded anything):
    such a step is compensated with ``forward_result`` None (docs/durability.md), whether or
    not its body got to run."""
    marks = _marks(path)
    charges = {m.split()[1] for m in marks if m.startswith("charge ")}
    refunds = [m.split()[1] for m in marks if m.startswith("refund ")]
    unknown = {
        line.split()[1]
        for line in flows.lines(path)
        if line.startswith("refund ") and line.endswith(" result=None")
    }
    assert charges <= set(refunds), marks
    assert set(refunds) - charges <= unknown, flows.lines(path)
    assert len(set(refunds)) == len(refunds), marks
    for name in charges:
        assert marks.index(f"charge {name}") < marks.index(f"refund {name}"), marks
    if parent_marks[0] in marks:
        assert marks[0] == parent_marks[0], marks
        assert marks[-1] == parent_marks[1] and marks.count(parent_marks[1]) == 1, marks


async def _children(engine: Engine, run_id: str) -> list[str]:
    created = of_type(await engine.client.handle(run_id).events(), EventType.CHILD_CREATED)
    return [str(e.data["childRunId"]) for e in created]


async def _all_cancelled(engine: Engine, parent_id: str, kids: list[str]) -> None:
    with pytest.raises(wayline.RunCancelledError):
        await engine.client.handle(parent_id).result(timeout=40)
    for kid_id in kids:
        with pytest.raises(wayline.RunCancelledError):
            await engine.client.handle(kid_id).result(timeout=10)
    parent_info = await engine.client.get_run(parent_id)
    assert parent_info.status is wayline.RunStatus.CANCELLED
    for kid_id in kids:
        kid = await engine.client.get_run(kid_id)
        assert kid.status is wayline.RunStatus.CANCELLED
    # the parent ended after each of its children: every child's end is in its log first
    events = await engine.client.handle(parent_id).events()
    assert events[-1].type is EventType.RUN_CANCELLED
    reported = of_type(events, EventType.CHILD_COMPLETED)
    assert sorted(str(e.data["childRunId"]) for e in reported) == sorted(kids)
    assert all(e.data["status"] == "cancelled" for e in reported), reported


def _charged(marks: list[str]) -> int:
    """How many charges the marks hold."""
    return sum(m.startswith("charge ") for m in marks)


def _any_charged(marks: list[str]) -> bool:
    return _charged(marks) > 0


async def _until_marked(path: str, reached: Callable[[list[str]], bool], interval: float) -> None:
    """Wait (20 s at most) until the ledger's marks are as ``reached`` wants them."""

    async def marked() -> bool:
        return reached(_marks(path))

    await wait_for(marked, timeout=20, interval=interval)


async def _until_a_child(engine: Engine, parent_id: str, interval: float) -> None:
    """Wait (20 s at most) until the parent has created a child."""

    async def any_child() -> bool:
        return bool(await _children(engine, parent_id))

    await wait_for(any_child, timeout=20, interval=interval)


async def _fan_cancelled(engine: Engine, parent: wayline.RunHandle[Any]) -> list[str]:
    """The fan's parent ends cancelled, and so does each of its children (returned)."""
    with pytest.raises(wayline.RunCancelledError):
        await parent.result(timeout=40)
    kids = await _children(engine, parent.run_id)
    await _all_cancelled(engine, parent.run_id, kids)
    return kids


async def _fan_unwound(engine: Engine, path: str, kids: list[str]) -> None:
    """Each child charged is refunded once, the parent's own step first and last, and no child
    runs outside the parent's log."""
    _check_ledger(path, ("reserve parent", "release parent"))
    assert len(await engine.world.list_runs(workflow="sleepy_kid")) == len(kids)


@pytest.mark.parametrize("when", ["at-once", "first-child"])
async def test_cancel_a_parent_while_its_gathered_children_start(
    engine: Engine, tmp_path: Path, when: str
) -> None:
    path = str(tmp_path / "ledger")
    async with engine.worker(ALL):
        parent = await engine.client.start(fan_parent, path, N)
        if when == "first-child":
            await _until_a_child(engine, parent.run_id, interval=0.005)
        assert await engine.client.cancel(parent.run_id, "stop the fan")
        kids = await _fan_cancelled(engine, parent)
    await _fan_unwound(engine, path, kids)


async def test_cancel_reaches_a_grandchild_innermost_first(engine: Engine, tmp_path: Path) -> None:
    path = str(tmp_path / "ledger")
    async with engine.worker(ALL):
        parent = await engine.client.start(top, path)
        await _until_marked(path, lambda marks: "charge grand" in marks, interval=0.02)
        [mid] = await _children(engine, parent.run_id)
        [grand] = await _children(engine, mid)
        assert await engine.client.cancel(parent.run_id, "stop the tree")
        await _all_cancelled(engine, parent.run_id, [mid])
        await _all_cancelled(engine, mid, [grand])
    assert _marks(path) == [
        "reserve top",
        "charge middle",
        "charge grand",
        "refund grand",
        "refund middle",
        "release top",
    ], _marks(path)
    info = await engine.client.get_run(mid)
    assert parent.run_id in str(info.error)


async def test_cancel_a_parent_as_its_child_completes(engine: Engine, tmp_path: Path) -> None:
    """The child's hook is resumed at the moment its parent is cancelled: no deadlock, the
    parent ends cancelled. A child that completed first is not reversed (its run ended
    completed; the parent reverses only its own steps); one that was still running unwinds
    (its refund)."""
    outcomes = []
    for i, delay in enumerate([0.0, 0.0, 0.002, 0.01, 0.05]):
        path = str(tmp_path / f"ledger{i}")
        token = f"race-{i}-{tmp_path.name}"
        async with engine.worker(ALL):
            parent = await engine.client.start(racing_parent, path, token)
            await wait_for(lambda t=token: engine.world.get_hook(t), timeout=20)  # type: ignore[misc]
            [kid_id] = await _children(engine, parent.run_id)

            async def resume(token: str = token, delay: float = delay, i: int = i) -> object:
                await asyncio.sleep(delay)  # the cancel lands first, or at the same moment
                return await engine.client.resume_hook(token, {"ok": i})

            _, cancelled = await asyncio.gather(
                resume(), engine.client.cancel(parent.run_id, "race"), return_exceptions=True
            )
            assert cancelled is True, cancelled
            with pytest.raises(wayline.RunCancelledError):
                await parent.result(timeout=30)
            kid = engine.client.handle(kid_id)
            try:
                await kid.result(timeout=10)
                outcomes.append("completed")
            except wayline.RunCancelledError:
                outcomes.append("cancelled")
        marks = _marks(path)
        if outcomes[-1] == "completed":
            assert marks == ["reserve parent", "charge kid", "release parent"], marks
        else:
            assert marks == ["reserve parent", "charge kid", "refund kid", "release parent"], marks
        assert (await parent.status()) is wayline.RunStatus.CANCELLED


async def test_cancel_then_the_worker_dies_then_another_finishes(
    engine: Engine, tmp_path: Path
) -> None:
    path = str(tmp_path / "ledger")
    worker = wayline.Worker(engine.world, ALL, settings=settings())
    await worker.start()
    parent = await engine.client.start(fan_parent, path, N)
    await _until_marked(path, _any_charged, interval=0.005)
    assert await engine.client.cancel(parent.run_id, "crash course")
    await worker.close(graceful=False)
    async with engine.worker(ALL):
        kids = await _fan_cancelled(engine, parent)
    await _fan_unwound(engine, path, kids)


async def test_cancelling_a_child_fails_its_parents_wait(engine: Engine, tmp_path: Path) -> None:
    path = str(tmp_path / "ledger")
    async with engine.worker(ALL):
        parent = await engine.client.start(catching_parent, path)
        await _until_marked(path, lambda marks: "charge kid" in marks, interval=0.02)
        [kid_id] = await _children(engine, parent.run_id)
        assert await engine.client.cancel(kid_id, "just the kid")
        assert await parent.result(timeout=20) == "child cancelled"
        with pytest.raises(wayline.RunCancelledError):
            await engine.client.handle(kid_id).result(timeout=5)
    assert _marks(path) == ["charge kid", "refund kid"]
    assert (await engine.client.get_run(parent.run_id)).status is wayline.RunStatus.COMPLETED


@pytest.mark.parametrize("when", ["at-once", "first-child"])
async def test_cancel_then_the_worker_dies_while_children_start(
    engine: Engine, tmp_path: Path, when: str
) -> None:
    path = str(tmp_path / "ledger")
    worker = wayline.Worker(engine.world, ALL, settings=settings())
    await worker.start()
    parent = await engine.client.start(fan_parent, path, N)
    if when == "first-child":
        await _until_a_child(engine, parent.run_id, interval=0.002)
    assert await engine.client.cancel(parent.run_id, "crash course")
    await asyncio.sleep(0.01)
    await worker.close(graceful=False)
    async with engine.worker(ALL):
        kids = await _fan_cancelled(engine, parent)
    await _fan_unwound(engine, path, kids)


async def test_two_workers_share_a_cancelled_fan(engine: Engine, tmp_path: Path) -> None:
    path = str(tmp_path / "ledger")
    other = await engine.make_world()
    async with engine.worker(ALL), engine.worker(ALL, world=other):
        parents = [await engine.client.start(fan_parent, f"{path}{i}", N) for i in range(3)]

        async def charged(p: str) -> bool:
            return any(m.startswith("charge ") for m in _marks(p))

        await wait_for(lambda: charged(f"{path}0"), timeout=20, interval=0.005)
        for parent in parents:
            assert await engine.client.cancel(parent.run_id, "both workers")
        for parent in parents:
            with pytest.raises(wayline.RunCancelledError):
                await parent.result(timeout=40)
            await _all_cancelled(engine, parent.run_id, await _children(engine, parent.run_id))
    for i in range(3):
        _check_ledger(f"{path}{i}", ("reserve parent", "release parent"))


async def test_a_parent_and_its_child_cancelled_together(engine: Engine, tmp_path: Path) -> None:
    path = str(tmp_path / "ledger")
    async with engine.worker(ALL):
        parent = await engine.client.start(fan_parent, path, 2)
        await _until_marked(path, lambda marks: _charged(marks) == 2, interval=0.02)
        kids = await _children(engine, parent.run_id)
        results = await asyncio.gather(
            engine.client.cancel(kids[0], "the kid alone"),
            engine.client.cancel(parent.run_id, "the whole fan"),
        )
        assert all(results), results
        await _all_cancelled(engine, parent.run_id, kids)
    _check_ledger(path, ("reserve parent", "release parent"))


async def test_a_claimed_child_never_created_when_its_parent_is_cancelled(
    engine: Engine, tmp_path: Path
) -> None:
    """The crash window between the parent's claim and the child's ``run_created``, with a
    cancel landing inside it: the child is created (and asked to cancel) by the unwind's
    delivery, and the parent does not wait on it for ever."""
    path = str(tmp_path / "ledger")
    world = engine.world
    original = world.append
    failed: list[str] = []
    client = wayline.Client(await engine.make_world())
    parent_ids: list[str] = []

    async def flaky_append(run_id, events, *, expected_seq=None):  # type: ignore[no-untyped-def]
        created = events[0].type is EventType.RUN_CREATED and events[0].data.get("parent")
        if created and not failed:
            failed.append(run_id)
            await client.cancel(parent_ids[0], "inside the window")
            raise wayline.WorldUnavailableError("simulated crash before the child was created")
        return await original(run_id, events, expected_seq=expected_seq)

    world.append = flaky_append  # type: ignore[method-assign]
    async with engine.worker(ALL):
        parent = await engine.client.start(fan_parent, path, 2)
        parent_ids.append(parent.run_id)
        with pytest.raises(wayline.RunCancelledError):
            await parent.result(timeout=40)
        kids = await _children(engine, parent.run_id)
        await _all_cancelled(engine, parent.run_id, kids)
    assert failed
    _check_ledger(path, ("reserve parent", "release parent"))


@pytest.mark.parametrize("where", ["before-append", "before-wake"])
async def test_a_cancelled_child_whose_report_is_lost_once_still_ends_its_parent(
    engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    """A child ended (cancelled by its parent's unwind) and its report to the parent failed
    once: before the ``child_completed`` was appended, or after it but before the wake."""
    from wayline._engine import ending

    path = str(tmp_path / "ledger")
    world = engine.world
    failed: list[str] = []
    real_report = ending.report_to_parent
    real_enqueue = world.enqueue

    async def flaky_report(w, info):  # type: ignore[no-untyped-def]
        if where == "before-append" and info.workflow == "sleepy_kid" and not failed:
            failed.append(info.run_id)
            raise wayline.WorldUnavailableError("simulated crash before the report")
        return await real_report(w, info)

    async def flaky_enqueue(topic, payload, **kw):  # type: ignore[no-untyped-def]
        if where == "before-wake" and payload.get("reason") == "child" and not failed:
            failed.append(payload["runId"])
            raise wayline.WorldUnavailableError("simulated crash before the wake")
        return await real_enqueue(topic, payload, **kw)

    monkeypatch.setattr(ending, "report_to_parent", flaky_report)
    world.enqueue = flaky_enqueue  # type: ignore[method-assign]
    async with engine.worker(ALL):
        parent = await engine.client.start(fan_parent, path, 1)
        await _until_marked(path, lambda marks: "charge k0" in marks, interval=0.02)
        assert await engine.client.cancel(parent.run_id, "lossy")
        with pytest.raises(wayline.RunCancelledError):
            await parent.result(timeout=40)
        await _all_cancelled(engine, parent.run_id, await _children(engine, parent.run_id))
    assert failed
    _check_ledger(path, ("reserve parent", "release parent"))


async def test_a_completed_childs_lost_report_still_reaches_its_waiting_parent(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No cancel: the child completes and its report to the waiting parent fails once."""
    from wayline._engine import ending

    failed: list[str] = []
    real_report = ending.report_to_parent

    async def flaky_report(w, info):  # type: ignore[no-untyped-def]
        if info.workflow == "kid_waits" and not failed:
            failed.append(info.run_id)
            raise wayline.WorldUnavailableError("simulated crash before the report")
        return await real_report(w, info)

    monkeypatch.setattr(ending, "report_to_parent", flaky_report)
    async with engine.worker([flows.parent_waits, flows.kid_waits]):
        handle = await engine.client.start(flows.parent_waits, "lost-report")
        await wait_for(lambda: engine.world.get_hook("lost-report"), timeout=20)
        await engine.client.resume_hook("lost-report", 7)
        assert await handle.result(timeout=20) == 7
    assert failed
