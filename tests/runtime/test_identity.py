"""Definition identity: recorded per run; a worker with another definition never drives it."""

from __future__ import annotations

import asyncio

import pytest

import wayline
from tests.runtime import flows
from tests.runtime.harness import Engine, settings, wait_for
from wayline._core.definitions import definition_identity, shape
from wayline.world import FLOW_TOPIC
from wayline.world.routing import pin_of, routed


def test_identity_covers_steps_options_and_compensation() -> None:
    s = shape(flows.saga)
    assert s["workflow"] == "saga"
    assert s["steps"]["charge_card"] == {"maxRetries": 3, "retryDelay": 1.0, "compensates": True}
    assert s["steps"]["ship_fails"]["compensates"] is False
    assert shape(flows.parent)["children"] == ["kid", "kid_fails"]
    assert "reserve" in shape(flows.uses_helper)["steps"]  # reached through a helper function
    # as a module attribute, through another module's helper, as a class attribute
    assert set(shape(flows.uses_other_module)["steps"]) == {"part_charge", "part_refund"}
    assert shape(flows.uses_other_module)["steps"]["part_charge"]["maxRetries"] == 2
    assert set(shape(flows.uses_class_attribute)["steps"]) == {"part_charge"}
    assert definition_identity(flows.saga) == definition_identity(flows.saga)
    assert definition_identity(flows.saga) != definition_identity(flows.saga_waits)
    assert len(flows.saga.identity) == 64


async def test_a_run_records_its_definition(engine: Engine) -> None:
    handle = await engine.client.start(flows.versioned_v1, 1)
    info = await engine.client.get_run(handle.run_id)
    record = info.attributes["definition"]
    assert record["identity"] == flows.versioned_v1.identity and record["revision"] == 1
    assert record["codeHash"] == flows.versioned_v1.code_hash


async def test_another_revision_never_drives_the_run(engine: Engine) -> None:
    """Routed by definition: a worker of revision 2 never receives a run pinned to revision 1
    (it stays pending, saying which worker it waits for), and never touches it."""
    handle = await engine.client.start(flows.versioned_v1, 1)
    async with engine.worker([flows.versioned_v2]) as v2:
        other = await engine.client.start(flows.versioned_v2, 2)
        assert await other.result(timeout=10) == "v2:4"  # v2 is alive and serving
        await asyncio.sleep(0.5)
        assert await handle.status() is wayline.RunStatus.PENDING
        why = str(await engine.client.waiting_for_worker(handle.run_id))
        assert f"identity {flows.versioned_v1.identity[:12]} revision 1" in why
        assert v2.handler.pins["versioned"] == {pin_of(flows.versioned_v2.identity_record()), None}
    assert not [e for e in await handle.events() if e.type.value.startswith("step")]
    async with engine.worker([flows.versioned_v1]):  # a matching worker arrives
        assert await handle.result(timeout=10) == "v1:2"


async def test_a_message_sent_before_the_pin_is_sent_on_to_the_runs_route(
    engine: Engine,
) -> None:
    """A message on the workflow's route (sent while the run was not pinned yet) reaches a
    worker of another revision: it sends it on to the run's own route, spending nothing."""
    handle = await engine.client.start(flows.versioned_v2, 1)
    stale = routed(FLOW_TOPIC, "versioned")
    await engine.world.enqueue(stale, {"runId": handle.run_id, "reason": "test"})
    tight = settings(max_queue_deliveries=1)
    async with engine.worker([flows.versioned_v1], settings=tight):
        await asyncio.sleep(1.0)
        assert await handle.status() is wayline.RunStatus.PENDING  # not driven, not blocked
        assert not await engine.world.receive(stale, wait_seconds=0.1)  # taken and sent on
    async with engine.worker([flows.versioned_v2], settings=tight):
        assert await handle.result(timeout=10) == "v2:3"


async def test_mismatch_can_fail_the_run_when_told_to(engine: Engine) -> None:
    handle = await engine.client.start(flows.versioned_v2, 1)
    await engine.world.enqueue(routed(FLOW_TOPIC, "versioned"), {"runId": handle.run_id})
    async with engine.worker([flows.versioned_v1], settings=settings(definition_mismatch="fail")):
        with pytest.raises(wayline.RunFailedError) as info:
            await handle.result(timeout=10)
    assert info.value.cause.code == "DEFINITION_MISMATCH"


async def test_strict_identity_enforces_the_code(engine: Engine) -> None:
    assert flows.strict_a.identity == flows.strict_b.identity  # same shape
    assert flows.strict_a.code_hash != flows.strict_b.code_hash
    handle = await engine.client.start(flows.strict_a, 1)
    async with engine.worker([flows.strict_b]):
        await asyncio.sleep(0.5)
        assert await handle.status() is wayline.RunStatus.PENDING  # its route names the code
        # a rolling upgrade under strict identity: the live worker has the same shape and
        # revision but other code, so it never receives the run, and the run says so
        why = await engine.client.waiting_for_worker(handle.run_id)
        assert why == (
            "waiting_for_worker: no live worker serves workflow 'strict' "
            f"identity {flows.strict_a.identity[:12]} revision 1 "
            f"code {flows.strict_a.code_hash[:12]}"
        )
    async with engine.worker([flows.strict_a]):
        assert await engine.client.waiting_for_worker(handle.run_id) is None
        assert await handle.result(timeout=10) == "a:1"
        # both codes stay in the registry, each with its own entry
        served = [e for e in await engine.world.list_served() if e["workflow"] == "strict"]
        assert {e["codeHash"] for e in served} == {
            flows.strict_a.code_hash,
            flows.strict_b.code_hash,
        }


async def test_without_strict_identity_a_code_fix_reaches_the_run(engine: Engine) -> None:
    """Same name, shape and revision, different code: allowed (replay divergence guards)."""
    handle = await engine.client.start(flows.chain, 3)
    info = await engine.client.get_run(handle.run_id)
    assert info.attributes["definition"]["strictIdentity"] is False
    async with engine.worker([flows.chain]):
        assert await handle.result(timeout=10) == 3


async def test_a_run_started_by_name_is_pinned_by_its_first_worker(engine: Engine) -> None:
    """The operator and `wayline start NAME` know no definitions: the first worker's
    run_started records its own, and from then on another revision never drives the run."""
    by_name = wayline.Client(engine.world)  # knows no definitions
    handle = await by_name.start("pinned", "tok-pin")
    assert "definition" not in (await engine.client.get_run(handle.run_id)).attributes
    async with engine.worker([flows.pinned_v1]):
        await wait_for(lambda: engine.world.get_hook("tok-pin"))
    record = (await engine.client.get_run(handle.run_id)).attributes["definition"]
    assert record == flows.pinned_v1.identity_record()
    seen = len(await handle.events())
    async with engine.worker([flows.pinned_v2]):
        await engine.client.resume_hook("tok-pin", "yes")  # its wake goes to v1's route
        await asyncio.sleep(0.5)
        assert await handle.status() is wayline.RunStatus.RUNNING
        assert len(await handle.events()) == seen + 1  # hook_received, and nothing driven
    async with engine.worker([flows.pinned_v1]):
        assert await handle.result(timeout=10) == "v1:yes"
