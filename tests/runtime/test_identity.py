"""Definition identity: recorded per run; a worker with another definition never drives it."""

from __future__ import annotations

import pytest

import wayline
from tests.runtime import flows
from tests.runtime.harness import Engine, settings, wait_for
from wayline._core.definitions import definition_identity, shape


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
    handle = await engine.client.start(flows.versioned_v1, 1)
    async with engine.worker([flows.versioned_v2]):

        async def blocked() -> bool:
            return await handle.status() is wayline.RunStatus.BLOCKED

        await wait_for(blocked)
        info = await engine.client.get_run(handle.run_id)
        assert info.error is not None and info.error["code"] == "DEFINITION_MISMATCH"
        assert "revision 1" in info.error["message"]
    assert not [e for e in await handle.events() if e.type.value.startswith("step")]
    async with engine.worker([flows.versioned_v1]):  # a matching worker arrives
        assert await handle.result(timeout=10) == "v1:2"


async def test_mismatch_can_fail_the_run_when_told_to(engine: Engine) -> None:
    handle = await engine.client.start(flows.versioned_v2, 1)
    async with engine.worker([flows.versioned_v1], settings=settings(definition_mismatch="fail")):
        with pytest.raises(wayline.RunFailedError) as info:
            await handle.result(timeout=10)
    assert info.value.error_code == "DEFINITION_MISMATCH"


async def test_strict_identity_enforces_the_code(engine: Engine) -> None:
    assert flows.strict_a.identity == flows.strict_b.identity  # same shape
    assert flows.strict_a.code_hash != flows.strict_b.code_hash
    handle = await engine.client.start(flows.strict_a, 1)
    async with engine.worker([flows.strict_b]):

        async def blocked() -> bool:
            return await handle.status() is wayline.RunStatus.BLOCKED

        await wait_for(blocked)
    async with engine.worker([flows.strict_a]):
        assert await handle.result(timeout=10) == "a:1"


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
    async with engine.worker([flows.pinned_v2]):
        await engine.client.resume_hook("tok-pin", "yes")

        async def blocked() -> bool:
            return await handle.status() is wayline.RunStatus.BLOCKED

        await wait_for(blocked)
    async with engine.worker([flows.pinned_v1]):  # recovery at start re-arms it
        assert await handle.result(timeout=10) == "v1:yes"
