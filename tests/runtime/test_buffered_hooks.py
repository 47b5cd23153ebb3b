"""Payloads sent before the wait: ``resume_hook(..., buffer=)`` for a token no hook holds yet
stores the payload, and the first hook a run of the same namespace creates for the token
receives it at once, exactly once; ``StartOptions(hooks=)`` does the same for the run it
starts (signal-with-start). On both worlds."""

from __future__ import annotations

import asyncio
import random

import pytest

import wayline
from tests.runtime import buffered_hook_flows as flows
from tests.runtime.harness import Engine, wait_for
from tests.runtime.sdk_flows import Approval
from wayline._core.events import Event, EventType
from wayline.world.hook_buffer import BufferedPayload

pytestmark = pytest.mark.partitioned  # docs/nats.md, "Partitions"


def _received(events: list[Event]) -> list[Event]:
    return [e for e in events if e.type is EventType.HOOK_RECEIVED]


async def test_a_payload_buffered_before_the_run_reaches_the_hook_is_received_once(
    engine: Engine,
) -> None:
    client = engine.client
    assert await client.resume_hook("early", {"ok": 1}, buffer="1m") is None
    async with engine.worker([flows.first_payload]):
        handle = await client.start(flows.first_payload, "early")
        assert await handle.result(timeout=10) == {"ok": 1}
    received = _received(await handle.events())
    assert len(received) == 1
    entry = await engine.world.hook_buffer().get("", "early")
    assert entry is not None and entry.taken_by == handle.run_id
    assert received[0].data["deliveryId"] == entry.entry_id


async def test_a_resume_racing_the_hooks_creation_delivers_exactly_once(engine: Engine) -> None:
    """Whoever takes the entry delivers it: the worker right after it wrote the hook, or the
    resumer that stored the entry and then found the hook. Rounds with small random delays
    put either side first."""
    client, rng = engine.client, random.Random(36)

    async def resume(token: str) -> str | None:
        await asyncio.sleep(rng.uniform(0, 0.03))
        return await client.resume_hook(token, token.upper(), buffer="1m")

    async with engine.worker([flows.first_payload]):
        for i in range(12):
            token = f"race-{i}"
            handle, _ = await asyncio.gather(
                client.start(flows.first_payload, token), resume(token)
            )
            assert await handle.result(timeout=10) == token.upper()
            assert len(_received(await handle.events())) == 1, token


async def test_an_expired_payload_is_never_delivered_and_is_swept(engine: Engine) -> None:
    client = engine.client
    assert await client.resume_hook("late", "stale", buffer="200ms") is None
    await asyncio.sleep(0.4)
    async with engine.worker([flows.first_payload]):
        handle = await client.start(flows.first_payload, "late")
        await client.wait_for_hook("late", timeout=10)  # it waits: the stale one is not taken
        assert await client.resume_hook("late", "fresh") == handle.run_id
        assert await handle.result(timeout=10) == "fresh"
    store = engine.world.hook_buffer()
    assert await store.sweep() == 1
    assert await store.get("", "late") is None


async def test_a_buffered_payload_reaches_only_a_run_of_its_namespace(engine: Engine) -> None:
    team_a = wayline.Client(engine.world, namespace="team-a")
    team_b = wayline.Client(engine.world, namespace="team-b")
    assert await team_a.resume_hook("shared", "for a", buffer="1m") is None
    async with engine.worker([flows.first_payload]):
        other = await team_b.start(flows.first_payload, "shared")
        await team_b.wait_for_hook("shared", timeout=10)  # team b's run waits: nothing for it
        await team_b.resume_hook("shared", "for b")
        assert await other.result(timeout=10) == "for b"
        mine = await team_a.start(flows.first_payload, "shared")
        assert await mine.result(timeout=10) == "for a"


async def test_a_typed_hook_refuses_a_bad_payload_before_it_is_buffered(engine: Engine) -> None:
    client = engine.client
    with pytest.raises(wayline.InvalidPayloadError, match="by"):
        await Approval.resume(client, "approve:1", {"approved": True}, buffer="1m")
    assert await engine.world.hook_buffer().get("", "approve:1") is None
    good = {"approved": True, "by": "ana"}
    assert await Approval.resume(client, "approve:1", good, buffer="1m") is None
    async with engine.worker([flows.typed_approval]):
        handle = await client.start(flows.typed_approval, "approve:1")
        assert await handle.result(timeout=10) == [True, "ana"]


async def test_a_repeated_delivery_id_is_buffered_once(engine: Engine) -> None:
    client = engine.client
    assert await client.resume_hook("dup", "one", delivery_id="d1", buffer="1m") is None
    assert await client.resume_hook("dup", "one", delivery_id="d1", buffer="1m") is None
    with pytest.raises(wayline.HookBufferOccupiedError, match="'dup'"):
        await client.resume_hook("dup", "two", delivery_id="d2", buffer="1m")
    async with engine.worker([flows.first_payload]):
        handle = await client.start(flows.first_payload, "dup")
        assert await handle.result(timeout=10) == "one"
        # a retry after the hook took it stores nothing again: it names the run that took it
        again = await client.resume_hook("dup", "one", delivery_id="d1", buffer="1m")
        assert again == handle.run_id
        second = await client.start(flows.first_payload, "dup")
        await client.wait_for_hook("dup", timeout=10)
        await client.resume_hook("dup", "live")
        assert await second.result(timeout=10) == "live"
    assert len(_received(await handle.events())) == 1


async def test_a_second_run_for_the_token_gets_nothing_after_the_first_took_it(
    engine: Engine,
) -> None:
    client = engine.client
    assert await client.resume_hook("once", "only", buffer="1m") is None
    async with engine.worker([flows.first_payload]):
        first = await client.start(flows.first_payload, "once")
        assert await first.result(timeout=10) == "only"
        second = await client.start(flows.first_payload, "once")
        hook = await client.wait_for_hook("once", timeout=10)
        assert hook.run_id == second.run_id
        assert _received(await second.events()) == []
        await client.resume_hook("once", "mine")
        assert await second.result(timeout=10) == "mine"


async def test_signal_with_start_buffers_payloads_for_the_started_run(engine: Engine) -> None:
    client = engine.client
    options = wayline.StartOptions(hooks={"sws": {"go": True}})
    async with engine.worker([flows.first_payload]):
        handle = await client.start_with(options, flows.first_payload, "sws")
        assert await handle.result(timeout=10) == {"go": True}
    assert len(_received(await handle.events())) == 1


async def test_signal_with_start_payloads_are_the_started_runs_alone(engine: Engine) -> None:
    """A payload given at start waits for that run's hook: another run that creates a hook
    for the token does not take it."""
    client = engine.client
    options = wayline.StartOptions(hooks={"mine": "for the started run"})
    async with engine.worker([flows.first_payload]):
        started = await client.start_with(options, flows.first_payload, "elsewhere")
        other = await client.start(flows.first_payload, "mine")
        hook = await client.wait_for_hook("mine", timeout=10)  # it waits: nothing for it
        assert hook.run_id == other.run_id
        await client.resume_hook("mine", "live")
        assert await other.result(timeout=10) == "live"
        await client.resume_hook("elsewhere", "done")
        assert await started.result(timeout=10) == "done"
    entry = await engine.world.hook_buffer().get("", "mine")
    assert entry is not None and entry.taken_by is None and entry.for_run == started.run_id


async def test_signal_with_start_of_a_live_run_by_business_id_reaches_its_waiting_hook(
    engine: Engine,
) -> None:
    """A second start under a business id whose run is live and already waits on the token:
    the payloads given with it go to that run (signal-with-start signals the run it finds),
    including the hook it waits on now."""
    client = engine.client
    async with engine.worker([flows.first_payload]):
        first = await client.start_with(
            wayline.StartOptions(id="order-sws"), flows.first_payload, "sws-live"
        )
        await client.wait_for_hook("sws-live", timeout=10)
        again = wayline.StartOptions(id="order-sws", hooks={"sws-live": "signalled"})
        second = await client.start_with(again, flows.first_payload, "sws-live")
        assert second.run_id == first.run_id
        assert await first.result(timeout=10) == "signalled"
    assert len(_received(await first.events())) == 1


async def test_a_refused_start_stores_none_of_its_payloads(engine: Engine) -> None:
    """A start refused because its run id is taken (``id_conflict="fail"``) signals nobody:
    the token stays free for a buffered resume of its own."""
    client = engine.client
    async with engine.worker([flows.first_payload]):
        run_id = "wf_" + "5e" * 16
        first = await client.start_with(
            wayline.StartOptions(run_id=run_id), flows.first_payload, "other-token"
        )
        refused = wayline.StartOptions(
            run_id=run_id, id_conflict="fail", hooks={"sws-refused": "not for anyone"}
        )
        with pytest.raises(wayline.RunAlreadyExistsError):
            await client.start_with(refused, flows.first_payload, "other-token")
        assert await engine.world.hook_buffer().get("", "sws-refused") is None
        await client.wait_for_hook("other-token", timeout=10)
        await client.resume_hook("other-token", "done")
        assert await first.result(timeout=10) == "done"


async def test_a_bad_buffer_duration_is_refused_and_stores_nothing(engine: Engine) -> None:
    with pytest.raises(ValueError, match="buffer="):
        await engine.client.resume_hook("t", "x", buffer="30d")
    with pytest.raises(ValueError, match="hooks_buffer="):
        wayline.StartOptions(hooks={"t": 1}, hooks_buffer=0)
    assert await engine.world.hook_buffer().get("", "t") is None


async def test_a_buffered_resume_to_a_waiting_hook_is_a_live_resume(engine: Engine) -> None:
    client = engine.client
    async with engine.worker([flows.first_payload]):
        handle = await client.start(flows.first_payload, "now")
        await wait_for(lambda: client.wait_for_hook("now", timeout=10))
        assert await client.resume_hook("now", "here", buffer="1m") == handle.run_id
        assert await handle.result(timeout=10) == "here"
    assert await engine.world.hook_buffer().get("", "now") is None


async def test_a_resend_delivers_a_payload_whose_taker_died_before_its_append(
    engine: Engine,
) -> None:
    """A taker that dies between the take and the ``hook_received`` leaves the entry taken
    and undelivered: the resend under the same delivery id finds the hook holding the token
    and resumes it, once."""
    client, store = engine.client, engine.world.hook_buffer()
    async with engine.worker([flows.first_payload]):
        handle = await client.start(flows.first_payload, "crash")
        await client.wait_for_hook("crash", timeout=10)
        now = engine.world.now()
        entry = BufferedPayload("", "crash", "d-9", "sent", now, now + 60)
        await store.store(entry)
        assert await store.take("", "crash", handle.run_id) is not None  # and then it died
        again = await client.resume_hook("crash", "sent", delivery_id="d-9", buffer="1m")
        assert again == handle.run_id
        repeat = await client.resume_hook("crash", "sent", delivery_id="d-9", buffer="1m")
        assert repeat == handle.run_id
        assert await handle.result(timeout=10) == "sent"
    assert len(_received(await handle.events())) == 1


async def test_a_typed_hook_leaves_an_untyped_payload_it_refuses_buffered(engine: Engine) -> None:
    """Buffered without its class (``Client.resume_hook``), a payload the typed hook would
    refuse is not delivered: the worker gives it back and the hook waits for a good one."""
    client = engine.client
    assert await client.resume_hook("approve:2", {"approved": "maybe"}, buffer="1m") is None
    async with engine.worker([flows.typed_approval]):
        handle = await client.start(flows.typed_approval, "approve:2")
        await client.wait_for_hook("approve:2", timeout=10)
        await Approval.resume(client, "approve:2", Approval(approved=False, by="bo"))
        assert await handle.result(timeout=10) == [False, "bo"]
    entry = await engine.world.hook_buffer().get("", "approve:2")
    assert entry is not None and entry.taken_by is None


async def test_a_redelivery_takes_the_payload_its_dead_delivery_did_not(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A delivery that dies between writing a hook and taking its payload leaves the hook
    waiting; the redelivery of its message looks for the payload of every waiting hook."""
    from wayline._engine import handler

    taken = handler.take_buffered
    died: list[str] = []

    async def dies_once(world: wayline.World, run_id: str, *args: object) -> int:
        if not died:
            died.append(run_id)
            raise RuntimeError("the delivery died after writing its hook")
        return await taken(world, run_id, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(handler, "take_buffered", dies_once)
    client = engine.client
    assert await client.resume_hook("dies", "kept", buffer="1m") is None
    async with engine.worker([flows.first_payload]):
        handle = await client.start(flows.first_payload, "dies")
        assert await handle.result(timeout=20) == "kept"
    assert died == [handle.run_id]
    assert len(_received(await handle.events())) == 1
