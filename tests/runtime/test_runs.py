"""Runs end to end on every world: steps, retries, fan-out, hooks, sleeps, failures, typing."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest

import wayline
from tests.lost_cancels import ends_on_its_cancel, losing_its_cancel
from tests.runtime import flows
from tests.runtime.harness import Engine, file_exists, of_type, wait_for
from wayline._core.events import EventType
from wayline.world import FLOW_TOPIC
from wayline.world.routing import route_of

pytestmark = pytest.mark.partitioned  # docs/nats.md, "Partitions"


async def test_a_chain_of_steps_completes_and_logs_each_step(engine: Engine) -> None:
    async with engine.worker([flows.chain]):
        handle = await engine.client.start(flows.chain, 5)
        assert await handle.result(timeout=10) == 10
    events = await handle.events()
    assert len(of_type(events, EventType.STEP_CREATED)) == 5
    assert len(of_type(events, EventType.STEP_COMPLETED)) == 5
    # lazy inline steps: created and started in the same write, stamped with the owner
    starts = of_type(events, EventType.STEP_STARTED)
    assert all(e.data.get("ownerMessageId") for e in starts)
    assert all("ownerMessageId" not in e.data for e in of_type(events, EventType.STEP_CREATED))
    assert await handle.status() is wayline.RunStatus.COMPLETED


async def test_retries_keep_the_idempotency_key(engine: Engine, tmp_path: Path) -> None:
    log = str(tmp_path / "flaky")
    async with engine.worker([flows.retrying]):
        handle = await engine.client.start(flows.retrying, log, 2)
        assert await handle.result(timeout=15) == 3
    attempts = flows.lines(log)
    assert [a.split(":", 1)[0] for a in attempts] == ["1", "2", "3"]
    keys = {a.split(":", 1)[1] for a in attempts}
    assert keys == {f"{handle.run_id}:flaky#0:forward"}
    events = await handle.events()
    assert len(of_type(events, EventType.STEP_RETRYING)) == 2
    # after the first retry the step is queue-owned: later starts carry no owner
    starts = of_type(events, EventType.STEP_STARTED)
    assert starts[0].data.get("ownerMessageId") and not starts[1].data.get("ownerMessageId")


async def test_retries_are_bounded_then_the_run_fails(engine: Engine, tmp_path: Path) -> None:
    log = str(tmp_path / "flaky")
    async with engine.worker([flows.retrying]):
        handle = await engine.client.start(flows.retrying, log, 99)
        with pytest.raises(wayline.RunFailedError) as info:
            await handle.result(timeout=15)
    assert info.value.cause.code == "STEP_FAILED"
    assert len(flows.lines(log)) == 4  # max_retries=3 counts retries after the first try


async def test_a_failed_step_can_be_caught(engine: Engine) -> None:
    async with engine.worker([flows.catches_failure, flows.fails]):
        handle = await engine.client.start(flows.catches_failure)
        assert await handle.result(timeout=10) == "caught: card declined"
        failing = await engine.client.start(flows.fails)
        with pytest.raises(wayline.RunFailedError, match="card declined"):
            await failing.result(timeout=10)


async def test_fan_out_runs_inline_and_eager_steps(engine: Engine) -> None:
    async with engine.worker([flows.fan_out]):
        handle = await engine.client.start(flows.fan_out, 10)
        assert await handle.result(timeout=15) == [2 * i for i in range(10)]
    starts = of_type(await handle.events(), EventType.STEP_STARTED)
    owned = [e for e in starts if e.data.get("ownerMessageId")]
    assert len(owned) == 3  # WORKFLOW_MAX_INLINE_STEPS; the other 7 went through the queue
    assert len(starts) == 10


async def test_hooks_deliver_typed_payloads(engine: Engine) -> None:
    async with engine.worker([flows.typed]):
        handle = await engine.client.start(flows.typed, flows.Point(1, 2))

        async def hook_ready() -> bool:
            hook = await engine.world.get_hook("typed:1")
            return hook is not None

        await wait_for(hook_ready)
        with pytest.raises(wayline.errors.InvalidPayloadError, match="cannot be serialised"):
            await engine.client.resume_hook("typed:1", object())
        await engine.client.resume_hook("typed:1", {"approved": True, "by": "ana"})
        assert await handle.result(timeout=10) == {"moved": {"x": 3, "y": 2}, "by": "ana"}
    with pytest.raises(wayline.HookNotFoundError):
        await engine.client.resume_hook("typed:1", {"approved": True, "by": "late"})


async def test_a_hook_payload_that_does_not_match_its_type_fails_the_run(engine: Engine) -> None:
    """A type with nothing recorded to check by at resume (an alias, not a class): the payload
    is written, and the run fails when it arrives, naming what did not validate. (A class is
    checked at resume: tests/runtime/test_typed_hooks.py.)"""
    from tests.runtime import sdk_flows

    async with engine.worker([sdk_flows.listed]):
        handle = await engine.client.start(sdk_flows.listed, "listed:5")
        await wait_for(lambda: engine.world.get_hook("listed:5"))
        await engine.client.resume_hook("listed:5", ["maybe"])
        with pytest.raises(wayline.RunFailedError, match="payload of hook"):
            await handle.result(timeout=10)


async def test_a_hook_times_out(engine: Engine) -> None:
    async with engine.worker([flows.hook_timeout]):
        handle = await engine.client.start(flows.hook_timeout, "nobody-answers")
        assert await handle.result(timeout=10) == "timed out"


async def test_sleep_is_durable_and_time_moves_with_the_log(engine: Engine) -> None:
    async with engine.worker([flows.sleeper]):
        start = time.monotonic()
        handle = await engine.client.start(flows.sleeper, 0.5)
        elapsed = await handle.result(timeout=10)
        assert time.monotonic() - start >= 0.5
        assert elapsed >= 0.5
    events = await handle.events()
    [created] = of_type(events, EventType.WAIT_CREATED)
    [completed] = of_type(events, EventType.WAIT_COMPLETED)
    assert completed.created_at >= created.data["resumeAt"]


async def test_deterministic_helpers(engine: Engine) -> None:
    async with engine.worker([flows.deterministic]):
        handle = await engine.client.start(flows.deterministic)
        ts, rnd, uid, after = await handle.result(timeout=10)
    events = await handle.events()
    # run_started stamp: time moves only with the log
    assert ts == pytest.approx(events[1].created_at, abs=1e-5)
    assert after == pytest.approx(of_type(events, EventType.STEP_COMPLETED)[0].created_at, abs=1e-5)
    assert 0 <= rnd < 1 and len(uid) == 36


async def test_cancel_ends_the_run_and_nothing_new_starts(engine: Engine, tmp_path: Path) -> None:
    marker = str(tmp_path / "m")
    async with engine.worker([flows.long_step_then_hook]):
        handle = await engine.client.start(flows.long_step_then_hook, marker, 0.8)
        await wait_for(file_exists(marker))
        assert await engine.client.cancel(handle.run_id) is True
        with pytest.raises(wayline.RunCancelledError):
            await handle.result(timeout=10)
        await _settle(1.2)
        assert await engine.client.cancel(handle.run_id) is False
    assert flows.lines(marker) == ["attempt 1"]  # the body was not started a second time
    events = await handle.events()
    assert events[-1].type is EventType.RUN_CANCELLED
    assert not of_type(events, EventType.HOOK_CREATED)


async def test_unserialisable_step_argument_names_the_step_and_type(engine: Engine) -> None:
    async with engine.worker([flows.bad_argument]):
        handle = await engine.client.start(flows.bad_argument)
        with pytest.raises(wayline.RunFailedError) as info:
            await handle.result(timeout=10)
    assert info.value.cause.code == "SERIALIZATION_ERROR"
    assert "echo" in str(info.value) and "object" in str(info.value)


async def test_awaiting_asyncio_in_a_workflow_fails_clearly(engine: Engine) -> None:
    async with engine.worker([flows.uses_asyncio_sleep]):
        handle = await engine.client.start(flows.uses_asyncio_sleep)
        with pytest.raises(wayline.RunFailedError, match=r"wayline\.sleep"):
            await handle.result(timeout=10)


async def test_unknown_workflow_name_is_a_clear_error(engine: Engine) -> None:
    client = wayline.Client(engine.world, [flows.chain])
    with pytest.raises(wayline.WorkflowNotFoundError, match="chain"):
        await client.start("no_such_workflow")
    assert await engine.world.list_runs() == []


async def test_malformed_queue_payload_is_set_aside_not_looped(engine: Engine) -> None:
    async with engine.worker([flows.chain]):
        await engine.world.enqueue(FLOW_TOPIC, {"nonsense": True})
        await engine.world.enqueue("step", {"runId": "wf_x"})

        async def set_aside() -> bool:
            return len(await engine.world.list_dead_letters()) == 2

        await wait_for(set_aside)
        # the worker keeps working
        handle = await engine.client.start(flows.chain, 3)
        assert await handle.result(timeout=10) == 3
    reasons = [d["reason"] for d in await engine.world.list_dead_letters()]
    assert any("runId" in r for r in reasons) and any("stepId" in r for r in reasons)


async def test_over_budget_delivery_fails_the_run(engine: Engine) -> None:
    from tests.runtime.harness import settings

    run = await engine.client.start(flows.chain, 1)
    # the start message crash-looped: simulate its deliveries being spent
    for _ in range(3):
        [d] = await engine.world.receive(route_of(FLOW_TOPIC, flows.chain), wait_seconds=2)
        await engine.world.retry(d, 0)
    async with engine.worker([flows.chain], settings=settings(max_queue_deliveries=3)):
        with pytest.raises(wayline.RunFailedError) as info:
            await run.result(timeout=10)
    assert info.value.cause.code == "MAX_DELIVERIES_EXCEEDED"


async def test_inline_continuation_does_not_reread_the_log(engine: Engine) -> None:
    """A step's cost must not grow with the run: one invocation continues its replay."""
    reads: list[int] = []
    original = engine.world.list_events

    async def counting(run_id: str, after_seq: int = 0):  # type: ignore[no-untyped-def]
        reads.append(after_seq)
        return await original(run_id, after_seq)

    original_read = engine.world.read_run

    async def counting_read(run_id: str):  # type: ignore[no-untyped-def]
        reads.append(0)  # the whole log, with the run
        return await original_read(run_id)

    engine.world.list_events = counting  # type: ignore[method-assign]
    engine.world.read_run = counting_read  # type: ignore[method-assign]
    async with engine.worker([flows.chain]):
        handle = await engine.client.start(flows.chain, 50)
        assert await handle.result(timeout=20) == sum(range(50))
    assert reads.count(0) <= 2, reads  # the log is read from the start once per delivery
    assert len(reads) < 10


async def _settle(seconds: float) -> None:
    import asyncio

    await asyncio.sleep(seconds)


async def test_a_malformed_message_naming_a_live_run_is_set_aside_and_the_run_goes_on(
    engine: Engine,
) -> None:
    """Anyone who can publish can forge a message naming a run: it must not end the run."""
    async with engine.worker([flows.kid_waits]):
        handle = await engine.client.start(flows.kid_waits, "malformed-target")
        await wait_for(lambda: engine.world.get_hook("malformed-target"))
        await engine.world.enqueue("step", {"runId": handle.run_id, "stepId": 5})

        async def set_aside() -> list[dict[str, object]]:
            return await engine.world.list_dead_letters()

        [dead] = await wait_for(set_aside)
        assert handle.run_id in str(dead["payload"]) and "stepId" in str(dead["reason"])
        assert not (await handle.status()).terminal
        await engine.client.resume_hook("malformed-target", {"ok": 1})
        assert await handle.result(timeout=10) == {"ok": 1}


async def test_a_wake_that_arrives_early_by_a_slow_clock_rearms_itself(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The wake was armed by a worker with the world's clock; the worker that receives it runs
    1 s behind, so the wake looks early. Its re-arm must not dedupe against itself (it is
    still in flight), or the run would wedge."""
    async with engine.worker([flows.sleeper]):
        handle = await engine.client.start(flows.sleeper, 0.5)

        async def armed() -> bool:
            return bool(of_type(await handle.events(), EventType.WAIT_CREATED))

        await wait_for(armed)
        monkeypatch.setattr(engine.world, "now", lambda: time.time() - 1.0)
        assert await handle.result(timeout=15) >= 0.5


async def test_a_start_with_a_run_id_is_idempotent(engine: Engine) -> None:
    from wayline._core.ids import new_run_id

    run_id = new_run_id()
    first = await engine.client.start_with(wayline.StartOptions(run_id=run_id), flows.chain, 3)
    # a retried start
    again = await engine.client.start_with(wayline.StartOptions(run_id=run_id), flows.chain, 3)
    assert first.run_id == again.run_id == run_id
    async with engine.worker([flows.chain]):
        assert await first.result(timeout=10) == 3
    assert len(await engine.world.list_runs()) == 1
    assert len(of_type(await first.events(), EventType.RUN_STARTED)) == 1
    with pytest.raises(wayline.WaylineError, match="exists already"):
        await engine.client.start_with(wayline.StartOptions(run_id=run_id), flows.fan_out, 1)
    with pytest.raises(wayline.WaylineError, match="32 lowercase hex"):
        await engine.client.start_with(wayline.StartOptions(run_id="my-run"), flows.chain, 1)


async def test_resume_hook_with_a_delivery_id_delivers_once(engine: Engine) -> None:
    """A caller that retries after a crash (the operator's WorkflowHook) names its delivery:
    the second call delivers nothing, and still answers the run id."""
    async with engine.worker([flows.kid_waits]):
        handle = await engine.client.start(flows.kid_waits, "tok-once")
        await wait_for(lambda: engine.world.get_hook("tok-once"))
        first = await engine.client.resume_hook("tok-once", 1, delivery_id="d-1")
        again = await engine.client.resume_hook("tok-once", 2, delivery_id="d-1")
        assert first == again == handle.run_id
        assert await handle.result(timeout=10) == 1
    received = of_type(await handle.events(), EventType.HOOK_RECEIVED)
    assert [e.data["payload"] for e in received] == [1]
    with pytest.raises(wayline.HookNotFoundError) as info:
        await engine.client.resume_hook("tok-never", 1)
    assert info.value.details["known"] is False


async def test_a_client_of_a_namespace_resumes_only_its_namespaces_hooks(
    engine: Engine,
) -> None:
    """A run records the namespace of the client that started it, its child inherits it, and
    a client of another namespace (or of none, for a run of none) resumes none of their
    hooks: nothing is written, the hook stays open, the message names nothing of the run."""
    ours = wayline.Client(engine.world, namespace="team-a")
    theirs = wayline.Client(engine.world, namespace="team-b")
    async with engine.worker([flows.parent_waits, flows.kid_waits]):
        parent = await ours.start(flows.parent_waits, "tok-ns")
        plain = await engine.client.start(flows.kid_waits, "tok-plain")
        hook = await wait_for(lambda: engine.world.get_hook("tok-ns"))
        await wait_for(lambda: engine.world.get_hook("tok-plain"))
        kid = await engine.world.get_run(hook.run_id)
        assert kid is not None and kid.run_id != parent.run_id
        assert kid.attributes["namespace"] == "team-a"  # the child's, from its parent
        for token, client in (("tok-ns", theirs), ("tok-plain", ours)):
            with pytest.raises(wayline.WrongNamespaceError) as refused:
                await client.resume_hook(token, "no", delivery_id="d-x")
            assert refused.value.code == "WRONG_NAMESPACE"
            assert client.namespace is not None and client.namespace in refused.value.message
            if client is theirs:
                assert "team-a" not in refused.value.message  # nothing of the other namespace
                assert "wayline hooks resume" not in refused.value.message
            else:  # a run of no namespace: where it is answered from
                assert "wayline hooks resume" in refused.value.message
            assert kid.run_id not in refused.value.message
        assert await ours.resume_hook("tok-ns", "yes", delivery_id="d-a") == kid.run_id
        assert await parent.result(timeout=10) == "yes"
        await engine.client.resume_hook("tok-plain", "any")  # no namespace: the whole world
        assert await plain.result(timeout=10) == "any"
    received = of_type(await engine.world.list_events(kid.run_id), EventType.HOOK_RECEIVED)
    assert [e.data["payload"] for e in received] == ["yes"]
    info = await engine.world.get_run(parent.run_id)
    assert info is not None and info.attributes["namespace"] == "team-a"
    assert "namespace" not in (await engine.client.get_run(plain.run_id)).attributes


async def test_a_hook_delivery_retried_after_its_run_ended_answers_the_run_id(
    engine: Engine,
) -> None:
    """The payload went in and the run took it and ended (its hook disposed) before the caller
    heard back: the caller's retry under the same delivery id answers the run id, as it does
    while the hook is open. Another delivery id is refused: the hook is gone."""
    async with engine.worker([flows.kid_waits]):
        handle = await engine.client.start(flows.kid_waits, "tok-late")
        await wait_for(lambda: engine.world.get_hook("tok-late"))
        first = await engine.client.resume_hook("tok-late", 7, delivery_id="d-7")
        assert await handle.result(timeout=10) == 7
    hook = await engine.world.get_hook("tok-late")
    assert hook is not None and not hook.active  # kept, inactive, naming its run
    assert await engine.client.resume_hook("tok-late", 7, delivery_id="d-7") == first
    with pytest.raises(wayline.HookNotFoundError):
        await engine.client.resume_hook("tok-late", 8, delivery_id="d-8")
    with pytest.raises(wayline.HookNotFoundError):
        await engine.client.resume_hook("tok-late", 9)
    received = of_type(await handle.events(), EventType.HOOK_RECEIVED)
    assert [e.data["payload"] for e in received] == [7]


async def test_a_delivery_id_is_one_hooks_not_the_whole_runs(engine: Engine) -> None:
    """Two hooks of one run may be sent the same delivery id (a caller that numbers deliveries
    per hook): each is delivered, and after the end each hook answers only for its own."""
    from tests.runtime import sdk_flows

    client = engine.client
    async with engine.worker([sdk_flows.two_hooks]):
        handle = await client.start(sdk_flows.two_hooks, "y")
        await wait_for(lambda: engine.world.get_hook("a:y"))
        await client.resume_hook("a:y", 1, delivery_id="1")

        async def second_open() -> bool:
            hook = await engine.world.get_hook("b:y")
            return hook is not None and hook.active

        await wait_for(second_open)
        await client.resume_hook("b:y", 2, delivery_id="1")  # not taken for a's delivery
        assert await handle.result(timeout=10) == [1, 2]
    assert await client.resume_hook("a:y", 5, delivery_id="1") == handle.run_id
    with pytest.raises(wayline.HookNotFoundError):
        await client.resume_hook("a:y", 5, delivery_id="2")  # a never had a "2"


async def test_a_fresh_runs_result_waits_for_its_end_before_it_reads(make_world: Any) -> None:
    """On a world that hears every terminal append (NATS), the handle ``start`` returned
    does not read the run right away (it would find it running: a round trip for nothing):
    its first read comes with the terminal hint, or after the first pause (1 s) if the hint
    was lost. A handle of a run that exists already (a repeated start) reads at once, as does
    every handle on another world (SQLite), unless the world holds the run's end from its own
    read (NATS: it read it for the first handle) and reads nothing."""
    from tests.runtime.harness import settings

    worker_world, client_world = await make_world(), await make_world()
    reads: list[tuple[float, bool]] = []
    began = 0.0
    original = client_world.get_run

    async def counted(run_id: str) -> Any:
        info = await original(run_id)
        reads.append((time.monotonic() - began, info is not None and info.status.terminal))
        return info

    client_world.get_run = counted  # type: ignore[method-assign]
    client = wayline.Client(client_world)
    async with wayline.Worker(worker_world, [flows.chain], settings=settings()):
        handle = await client.start(flows.chain, 3)
        began = time.monotonic()
        assert await handle.result(timeout=10) == 3
        fresh = list(reads)
        reads.clear()
        # it ended already
        again = await client.start_with(wayline.StartOptions(run_id=handle.run_id), flows.chain, 3)
        reads.clear()
        began = time.monotonic()
        assert await again.result(timeout=10) == 3
    assert fresh and fresh[-1][1]  # the last read found it ended
    if client_world.hears_every_end:
        # a read that found it running came only after the first pause, never at once
        assert all(ended or at >= 0.05 for at, ended in fresh), fresh
    # an ended run: one read, at once, or none when the world holds its end
    assert len(reads) == (0 if await client_world.known_end(handle.run_id) else 1), reads
    assert all(ended for _, ended in reads), reads


async def test_a_run_without_a_parent_is_not_read_back_after_its_end(
    make_world: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """The worker that writes a run's end logs it from the event it wrote: only a child's end
    is read back (to report it to its parent). The end is still logged, with its status."""
    from tests.runtime.harness import settings

    worker_world, client_world = await make_world(), await make_world()
    reads: list[str] = []
    original = worker_world.get_run

    async def counted(run_id: str) -> Any:
        info = await original(run_id)
        reads.append("terminal" if info is not None and info.status.terminal else "live")
        return info

    original_read = worker_world.read_run

    async def counted_read(run_id: str) -> Any:
        info, events = await original_read(run_id)
        reads.append("terminal" if info is not None and info.status.terminal else "live")
        return info, events

    worker_world.get_run = counted  # type: ignore[method-assign]
    worker_world.read_run = counted_read  # type: ignore[method-assign]
    client = wayline.Client(client_world)
    caplog.set_level("INFO", logger="wayline.runtime")
    async with wayline.Worker(worker_world, [flows.chain, flows.fails], settings=settings()):
        ok = await client.start(flows.chain, 3)
        assert await ok.result(timeout=10) == 3
        bad = await client.start(flows.fails)
        with pytest.raises(wayline.RunFailedError):
            await bad.result(timeout=10)
    assert "terminal" not in reads, reads  # nothing read the ended runs back
    lines = [r.getMessage() for r in caplog.records if r.name == "wayline.runtime"]
    assert f"run {ok.run_id} completed" in lines
    # the recorded message is the user's text alone; the line still names the step
    failed = f"run {bad.run_id} failed: [STEP_FAILED] step 'fatal_step' raised"
    assert any(m.startswith(failed) and "card declined" in m for m in lines), lines


async def test_a_resume_that_meets_a_disposed_hook_says_so(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The token's hook is disposed between the resumer's look-up and its append: the resumer
    answers ``HookNotFoundError`` (known), as for any hook that is gone, with or without a
    delivery id; it was a bare ``EntityConflictError``. The payload goes to no other hook."""
    world = engine.world
    async with engine.worker([flows.hook_disposed_after_one]):
        await engine.client.start(flows.hook_disposed_after_one, "tok-gone")
        stale = await wait_for(lambda: world.get_hook("tok-gone"))
        assert stale.active
        await engine.client.resume_hook("tok-gone", 1)

        async def disposed() -> bool:
            hook = await world.get_hook("tok-gone")
            return hook is not None and not hook.active

        await wait_for(disposed)
        real = world.get_hook
        for delivery_id in (None, "d-late"):
            looks: list[str] = []

            async def first_stale(token: str, looks: list[str] = looks) -> Any:
                looks.append(token)
                return stale if len(looks) == 1 else await real(token)

            monkeypatch.setattr(world, "get_hook", first_stale)
            with pytest.raises(wayline.HookNotFoundError) as info:
                await engine.client.resume_hook("tok-gone", 2, delivery_id=delivery_id)
            assert info.value.details["known"] is True and "disposed" in str(info.value)
            monkeypatch.setattr(world, "get_hook", real)


@pytest.mark.parametrize("same_world", [True, False], ids=["one-world", "two-worlds"])
async def test_a_result_asked_after_the_run_ended_does_not_wait(
    make_world: Any, monkeypatch: pytest.MonkeyPatch, same_world: bool
) -> None:
    """A handle fresh from ``start`` whose run ended before ``result()`` was called returns
    without waiting for a hint or a poll: on a world that hears every end it knows the end;
    elsewhere (SQLite: an end is heard only while someone waits) its first read is at once.
    With the client and the worker on one world, or on two of one store."""
    from tests.runtime.harness import record_result_waits, settings

    worker_world = await make_world()
    client_world = worker_world if same_world else await make_world()
    client = wayline.Client(client_world)
    async with wayline.Worker(worker_world, [flows.chain], settings=settings()):
        handles = [await client.start(flows.chain, 3) for _ in range(3)]
        for handle in handles:  # every run has ended; then the results are asked
            await wait_for(lambda h=handle: _ended(client_world, h.run_id), timeout=20)
        waits = record_result_waits(monkeypatch)
        assert [await h.result(timeout=20) for h in handles] == [3, 3, 3]  # 0 + 1 + 2
    assert waits == [], waits


async def _ended(world: Any, run_id: str) -> bool:
    info = await world.get_run(run_id)
    return info is not None and info.status.terminal


async def test_a_result_wait_that_loses_its_cancel_still_ends(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cancel that lands just as a read of the run completes can be lost (``asyncio.wait_for``
    before Python 3.12, which the NATS client uses); ``asyncio.wait_for(handle.result(), t)``
    cancels it at its timeout and waits for it. The wait ends all the same instead of polling
    until the run ends (here: never, no worker serves it)."""
    handle = await engine.client.start(flows.chain, 3)
    in_call = asyncio.Event()
    monkeypatch.setattr(engine.world, "get_run", losing_its_cancel(engine.world.get_run, in_call))
    task = asyncio.ensure_future(handle.result())
    await ends_on_its_cancel(task, in_call, "the result wait carried on after its cancel")


async def test_a_result_wait_in_a_task_that_handled_its_cancel_waits(engine: Engine) -> None:
    """A task that handles its own cancel by waiting for its run (cleanup before it goes) is
    not stopped by that cancel again: only a cancel that comes during the wait ends it (the
    check for a swallowed cancel counts the cancels since the wait began)."""
    handle = await engine.client.start(flows.chain, 3)  # no worker yet: it stays pending
    waiting = asyncio.Event()

    async def cleanup_on_cancel() -> int:
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            waiting.set()
            return await handle.result(timeout=20)
        raise AssertionError("not cancelled")

    task = asyncio.ensure_future(cleanup_on_cancel())
    await asyncio.sleep(0)
    task.cancel()
    await asyncio.wait_for(waiting.wait(), 10)
    async with engine.worker([flows.chain]):
        assert await asyncio.wait_for(task, 30) == 3
