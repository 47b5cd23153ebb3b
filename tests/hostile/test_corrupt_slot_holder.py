"""A run whose log cannot be read keeps the workflow concurrency slot it holds, as a fenced
run keeps its hook tokens: a run waiting for that slot waits, visibly naming the unreadable
holder, is never set aside for the holder's damage, and starts once the holder is repaired
and ends. On both worlds."""

from __future__ import annotations

from pathlib import Path

import wayline
from tests.hostile.poison import poison_log
from tests.runtime import sdk_flows
from tests.runtime.flows import lines
from tests.runtime.harness import Engine, wait_for

Order = sdk_flows.Order


async def test_a_holder_whose_log_cannot_be_read_keeps_its_slot_and_the_waiter_starts_after(
    engine: Engine, tmp_path: Path
) -> None:
    path = str(tmp_path / "marks")
    flow, client = sdk_flows.one_per_customer, engine.client
    async with engine.worker([flow]):
        a = await client.start(flow, Order("ana", "a1"), path)
        await wait_for(lambda: engine.world.get_hook("hold:a1"))
        seq = await poison_log(engine.world, a.run_id, b"{not json")
        b = await client.start(flow, Order("ana", "a2"), path)

        async def waits_naming_the_holder() -> dict[str, object] | None:
            info = await client.get_run(b.run_id)
            why = info.error or {}
            if info.status is wayline.RunStatus.BLOCKED and why.get("unreadable"):
                return why
            return None

        why = await wait_for(waits_naming_the_holder, timeout=15)
        assert why["waitingFor"] == "concurrency" and why["code"] == "CONCURRENCY_LIMIT"
        assert why["unreadable"] == [a.run_id]
        message = str(why["message"])
        assert a.run_id in message and "CORRUPT_LOG" in message and f"--drop-seq {seq}" in message
        assert lines(path) == ["start a1"]  # b has not started beside the fenced holder

        # b is never set aside for a's damage (its start message was the one at stake)
        dead = await engine.world.list_dead_letters()
        assert not [d for d in dead if b.run_id in str(d)], dead

        await client.repair_run(a.run_id, seq)
        await client.resume_hook("hold:a1", None)
        assert await a.result(timeout=15) == "a1"
        await wait_for(lambda: engine.world.get_hook("hold:a2"), timeout=20)
        info = await client.get_run(b.run_id)
        assert info.status is wayline.RunStatus.RUNNING and info.error is None
        await client.resume_hook("hold:a2", None)
        assert await b.result(timeout=15) == "a2"
    assert lines(path) == ["start a1", "start a2"]
