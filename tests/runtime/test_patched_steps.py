"""A step added inside ``wayline.patched(...)`` does not strand the runs pinned before it: a
worker of the new code also serves the identity of its shape without the patched steps."""

from __future__ import annotations

import asyncio

import pytest
from examples import adding_a_step as example

import wayline
from tests.runtime.harness import Engine
from wayline._core.events import EventType

pytestmark = pytest.mark.engine_logic  # docs/testing.md, "The pyramid"


def test_the_new_code_also_serves_the_identity_of_the_code_before_the_patch() -> None:
    v1, v2 = example.order_v1, example.order_v2
    assert v1.identity != v2.identity  # a new run is pinned to the new shape
    assert v2.identities == (v2.identity, v1.identity)
    assert v1.identities == (v1.identity,)  # the old code never drives a run of the new one
    assert v2.mismatch(v1.identity_record()) is None
    assert v1.mismatch(v2.identity_record()) is not None


async def test_a_live_run_finishes_on_the_new_code_taking_the_old_branch(engine: Engine) -> None:
    """The tested example of docs/durability.md: a run waits for its approval on v1, its
    worker stops, a v2 worker (with a step added inside patched) takes over."""
    client = engine.client
    async with engine.worker([example.order_v1]):
        old = await client.start(example.order_v1, "A-1")
        await client.wait_for_hook("approve:A-1", timeout=10)
    async with engine.worker([example.order_v2]):
        assert await client.waiting_for_worker(old.run_id) is None  # served, not stranded
        new = await client.start(example.order_v2, "B-2")
        await client.wait_for_hook("approve:B-2", timeout=10)
        await client.resume_hook("approve:A-1", "ana")
        await client.resume_hook("approve:B-2", "bo")
        assert await old.result(timeout=10) == ["reserved A-1", "shipped A-1 (ana)"]
        assert await new.result(timeout=10) == [
            "reserved B-2",
            "fraud-checked B-2",
            "shipped B-2 (bo)",
        ]
    old_info, new_info = await client.get_run(old.run_id), await client.get_run(new.run_id)
    assert old_info.attributes["definition"]["identity"] == example.order_v1.identity
    assert new_info.attributes["definition"]["identity"] == example.order_v2.identity
    assert not [e for e in await old.events() if e.type is EventType.PATCH_MARKED]
    assert [e for e in await new.events() if e.type is EventType.PATCH_MARKED]


async def test_a_run_of_the_new_code_never_reaches_an_old_worker(engine: Engine) -> None:
    """A run pinned to the new shape waits for a new worker: the old code would not know the
    patched step, so it never receives the run (and writes nothing to it)."""
    client = engine.client
    async with engine.worker([example.order_v1]):
        new = await client.start(example.order_v2, "C-3")
        await asyncio.sleep(0.5)
        assert await new.status() is wayline.RunStatus.PENDING
        why = str(await client.waiting_for_worker(new.run_id))
        assert f"identity {example.order_v2.identity[:12]}" in why
    async with engine.worker([example.order_v2]):
        await client.wait_for_hook("approve:C-3", timeout=10)
        await client.resume_hook("approve:C-3", "cy")
        assert (await new.result(timeout=10))[1] == "fraud-checked C-3"
