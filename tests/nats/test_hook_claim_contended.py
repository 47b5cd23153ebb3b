"""A hook's token claim that another writer keeps rewriting (a real second connection writes
the entry before each of this writer's attempts) is not a conflict: the append gives up with
a retryable :class:`WorldUnavailableError`, nothing is written, and the run is not failed. It
failed the run ``HOOK_CONFLICT`` with ``holderRunId: null``."""

from __future__ import annotations

import json
from typing import Any

import pytest

import wayline
from tests.nats_fixtures import OpenWorlds
from tests.runtime.harness import wait_for
from wayline._core.events import EventType as T
from wayline._core.events import NewEvent
from wayline._core.ids import new_run_id
from wayline.errors import HookTokenConflictError, WorldUnavailableError
from wayline.worlds.nats.names import kv_key


def _interfere(world: Any, other: Any, token: str, times: int) -> dict[str, int]:
    """Before each of ``world``'s next ``times`` writes of ``token``'s entry, ``other``
    rewrites it (as a stale holder's: not active), so the write finds it moved."""
    hooks = world._log.claims._hooks
    real_create, real_update = hooks.create, hooks.update
    state = {"left": times, "writes": 0}

    async def bump(key: str) -> None:
        if state["left"] > 0 and key == kv_key(token):
            state["left"] -= 1
            state["writes"] += 1
            stale = {"token": token, "run": new_run_id(), "cid": "x", "active": False}
            await other._log.claims._hooks.put(key, json.dumps(stale).encode())

    async def create(key: str, value: bytes, *args: Any, **kwargs: Any) -> Any:
        await bump(key)
        return await real_create(key, value, *args, **kwargs)

    async def update(key: str, value: bytes, *args: Any, **kwargs: Any) -> Any:
        await bump(key)
        return await real_update(key, value, *args, **kwargs)

    hooks.create, hooks.update = create, update
    return state


async def test_a_contended_claim_is_retryable_and_writes_nothing(
    open_nats_world: OpenWorlds,
) -> None:
    a, b = await open_nats_world(), await open_nats_world()
    run_id = new_run_id()
    await a.append(run_id, [NewEvent(T.RUN_CREATED, data={"workflow": "wf", "input": {}})])
    await a.append(run_id, [NewEvent(T.RUN_STARTED)])
    state = _interfere(a, b, "busy", times=1000)
    hook = [NewEvent(T.HOOK_CREATED, "h1", {"token": "busy"})]
    with pytest.raises(WorldUnavailableError) as raised:
        await a.append(run_id, hook, expected_seq=2)
    assert not isinstance(raised.value, HookTokenConflictError)
    assert "busy" in str(raised.value) and "contended" in str(raised.value)
    assert state["writes"] >= 5
    assert [e.type for e in await b.list_events(run_id)] == [T.RUN_CREATED, T.RUN_STARTED]
    state["left"] = 0  # the other writer stops: the same append now lands
    await a.append(run_id, hook, expected_seq=2)
    found = await b.get_hook("busy")
    assert found is not None and (found.run_id, found.active) == (run_id, True)


@wayline.workflow
async def waits_for_busy() -> Any:
    return await wayline.create_hook("busy-run")


async def test_a_run_whose_claim_is_contended_waits_on_its_hook_after_a_retry(
    open_nats_world: OpenWorlds,
) -> None:
    a, b = await open_nats_world(), await open_nats_world()
    state = _interfere(a, b, "busy-run", times=45)  # past what appends retried, then it stops
    client = wayline.Client(b)
    async with wayline.Worker(a, [waits_for_busy]):
        handle = await client.start(waits_for_busy)

        async def hooked() -> bool:
            hook = await b.get_hook("busy-run")
            if hook is not None and hook.active and hook.run_id == handle.run_id:
                return True
            return (await client.get_run(handle.run_id)).status.terminal  # failed: say so

        await wait_for(hooked, timeout=60)
        info = await client.get_run(handle.run_id)
        assert info.status is wayline.RunStatus.RUNNING and info.error is None, info
        assert state["writes"] == 45
        await client.resume_hook("busy-run", {"ok": True})
        assert await handle.result(timeout=30) == {"ok": True}


async def test_an_empty_entry_for_the_token_is_overwritten_not_retried_forever(
    open_nats_world: OpenWorlds,
) -> None:
    """An entry whose value is empty (a ``nats kv put`` of ""): ``create`` refuses it (the key
    exists) and ``_kv_entry`` reads it as no entry, so every round finds nothing to judge and
    the claim gave up as "contended" on every delivery, for ever. It holds nothing: overwrite."""
    a, b = await open_nats_world(), await open_nats_world()
    run_id = new_run_id()
    await a.append(run_id, [NewEvent(T.RUN_CREATED, data={"workflow": "wf", "input": {}})])
    await a.append(run_id, [NewEvent(T.RUN_STARTED)])
    await b._log.claims._hooks.put(kv_key("blank"), b"")
    hook = [NewEvent(T.HOOK_CREATED, "h1", {"token": "blank"})]
    await a.append(run_id, hook, expected_seq=2)
    found = await b.get_hook("blank")
    assert found is not None and (found.run_id, found.active) == (run_id, True)
