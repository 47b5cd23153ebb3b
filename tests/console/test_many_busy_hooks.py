"""A run that makes many hooks, each resumed many times, on every world: the run's JSON and its
story carry the payloads of all its hooks within one budget, not each hook's first 50 and last
10 whatever the number of hooks, and every payload of every hook is still read once and in
order through ``/hooks/{hook}/payloads`` from the hook's ``nextPayloadCursor``
(docs/console.md, "Hooks with many payloads")."""

from __future__ import annotations

import wayline
from tests.console.conftest import Console
from wayline._core.events import EventType, NewEvent

HOOKS = 12
EACH = 70  # past the 60 a hook carries alone: 12 of them were 720 payloads in the run's JSON
RUN_BUDGET = 240  # the run's budget past each hook's first payload (docs/console.md)


@wayline.workflow(name="many_busy_hooks.fan")
async def fan(order: str) -> int:
    hooks = [wayline.create_hook(f"many_busy_hooks:{order}:{i}") for i in range(HOOKS)]
    return len([_ async for _ in hooks[0]])


async def test_many_busy_hooks_share_one_budget_in_the_run_json_and_page_every_payload(
    console: Console,
) -> None:
    client = console.engine.client
    async with console.engine.worker([fan]):
        handle = await client.start(fan, "b1")
        await client.wait_for_hook(f"many_busy_hooks:b1:{HOOKS - 1}", timeout=10)
    for i in range(HOOKS):
        hook = await client.world.get_hook(f"many_busy_hooks:b1:{i}")
        assert hook is not None
        received = [
            NewEvent(EventType.HOOK_RECEIVED, hook.correlation_id, {"payload": {"h": i, "n": n}})
            for n in range(EACH)
        ]
        await client.world.append(handle.run_id, received)

    got = await console.http.get(f"/api/runs/{handle.run_id}")
    assert got.status_code == 200, got.text[:300]
    run = got.json()
    hooks = run["hooks"]
    assert len(hooks) == HOOKS
    carried = sum(1 + len(h["later"]) + len(h["lastPayloads"]) for h in hooks)
    assert carried <= HOOKS + RUN_BUDGET, carried
    lines = run["story"].count("received after ")
    assert lines <= HOOKS + RUN_BUDGET, lines

    for i, hook in enumerate(hooks):
        assert hook["payloadCount"] == EACH
        assert hook["payload"] == {"h": i, "n": 0}  # every hook still shows its first payload
        # what the run's JSON carries, then the pages from its cursor: each payload once
        seen = [hook["payload"]["n"]] + [p["payload"]["n"] for p in hook["later"]]
        tail = [p["payload"]["n"] for p in hook["lastPayloads"]]
        cursor = hook["nextPayloadCursor"]
        while cursor is not None:
            page = (
                await console.http.get(
                    f"/api/runs/{handle.run_id}/hooks/{hook['id']}/payloads",
                    params={"after": cursor, "limit": 7},
                )
            ).json()
            seen += [p["payload"]["n"] for p in page["payloads"]]
            cursor = page["nextCursor"]
        if hook["nextPayloadCursor"] is None:  # carried whole: the last ones too
            seen += tail
        assert seen == list(range(EACH)), (i, seen)
        assert tail == seen[len(seen) - len(tail) :]
