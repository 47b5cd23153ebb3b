"""Two writers append the same ``hook_created`` (same run, hook id, token, expected seq) at
once, as an inline owner and a step worker replaying the run do: one wins, and the loser's
cleanup must not delete the token entry the winner's live hook resolves through."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tests.nats_fixtures import OpenWorlds
from tests.runtime.harness import wait_for
from wayline._core.events import EventType as T
from wayline._core.events import NewEvent
from wayline._core.ids import new_run_id
from wayline.errors import WorldError
from wayline.worlds.nats import direct
from wayline.worlds.nats.names import kv_key


async def _run(world: Any) -> str:
    run_id = new_run_id()
    await world.append(run_id, [NewEvent(T.RUN_CREATED, data={"workflow": "wf", "input": {}})])
    await world.append(run_id, [NewEvent(T.RUN_STARTED)])
    return run_id


async def _race(a: Any, b: Any, run_id: str, token: str) -> list[Any]:
    await b.list_events(run_id)  # both writers have read the log up to seq 2
    hook = [NewEvent(T.HOOK_CREATED, "h1", {"token": token})]
    return list(
        await asyncio.gather(
            a.append(run_id, hook, expected_seq=2),
            b.append(run_id, hook, expected_seq=2),
            return_exceptions=True,
        )
    )


async def _check(a: Any, b: Any, run_id: str, token: str, outcome: list[Any]) -> None:
    won = [r for r in outcome if not isinstance(r, BaseException)]
    assert len(won) == 1, outcome
    assert all(isinstance(r, WorldError) for r in outcome if isinstance(r, BaseException))
    listed = await a.list_events(run_id)
    assert [e.type for e in listed].count(T.HOOK_CREATED) == 1
    for world in (a, b):
        hook = await world.get_hook(token)
        assert hook is not None, f"token {token} no longer resolves to its live hook"
        assert (hook.run_id, hook.correlation_id, hook.active) == (run_id, "h1", True)


def _first_publishes_between(monkeypatch: pytest.MonkeyPatch) -> None:
    """Hold the first of two racing event publishes until the second writer is about to
    publish (it has claimed the token by then); release the second once the first landed."""
    real = direct.publish_acked
    state: dict[str, Any] = {"n": 0}
    second, first_done = asyncio.Event(), asyncio.Event()

    async def publish(nc: Any, subject: str, payload: bytes, *args: Any) -> Any:
        if ".ev." not in subject or b"hook_created" not in payload:
            return await real(nc, subject, payload, *args)
        state["n"] += 1
        if state["n"] % 2 == 1:
            await asyncio.wait_for(second.wait(), 10)
            second.clear()
            try:
                return await real(nc, subject, payload, *args)
            finally:
                first_done.set()
        second.set()
        await asyncio.wait_for(first_done.wait(), 10)
        first_done.clear()
        return await real(nc, subject, payload, *args)

    monkeypatch.setattr(direct, "publish_acked", publish)


async def test_the_loser_of_an_ordered_hook_race_keeps_the_winners_token(
    open_nats_world: OpenWorlds, monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b = await open_nats_world(), await open_nats_world()
    _first_publishes_between(monkeypatch)
    for i in range(5):
        run_id = await _run(a)
        token = f"ordered-{i}"
        await _check(a, b, run_id, token, await _race(a, b, run_id, token))


async def test_racing_hook_appends_keep_the_token_resolvable(open_nats_world: OpenWorlds) -> None:
    a, b = await open_nats_world(), await open_nats_world()
    for i in range(50):
        run_id = await _run(a)
        token = f"race-{i}"
        await _check(a, b, run_id, token, await _race(a, b, run_id, token))


async def test_a_writer_that_fails_first_leaves_the_shared_claim(
    open_nats_world: OpenWorlds, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The second writer's publish never lands (its server link times out) and it gives up
    before the first one publishes: the claim it found was the first writer's, not its own."""
    import nats.errors

    a, b = await open_nats_world(), await open_nats_world()
    real = direct.publish_acked
    b_gave_up = asyncio.Event()

    async def publish(nc: Any, subject: str, payload: bytes, *args: Any) -> Any:
        if ".ev." in subject and b"hook_created" in payload:
            if nc is b._nc:
                raise nats.errors.TimeoutError
            await asyncio.wait_for(b_gave_up.wait(), 10)
        return await real(nc, subject, payload, *args)

    run_id = await _run(a)
    await b.list_events(run_id)
    hook = [NewEvent(T.HOOK_CREATED, "h1", {"token": "first"})]
    first = asyncio.create_task(a.append(run_id, hook, expected_seq=2))
    monkeypatch.setattr(direct, "publish_acked", publish)
    await wait_for(lambda: a._log.claims._kv_entry(kv_key("first")))  # the first writer claimed
    try:
        with pytest.raises(WorldError):
            await b.append(run_id, hook, expected_seq=2)
    finally:
        b_gave_up.set()
    await first
    await _check(a, b, run_id, "first", [first.result(), WorldError("gave up")])
