"""A poisoned event-log entry fences one run: typed CORRUPT_LOG errors naming run, entry and
why; the run shows ``corrupt``; its deliveries are set aside, not retried; other runs carry
on; ``repair --drop-seq`` removes the entry and the run resumes. On both worlds."""

from __future__ import annotations

from pathlib import Path

import pytest

import wayline
from tests.hostile import flows
from tests.hostile.poison import poison_log
from tests.runtime.harness import Engine, wait_for
from wayline.errors import CorruptLogError
from wayline.world import FLOW_TOPIC

GARBAGE = [
    b"\xff\xfe\x00not utf-8",
    b"{not json",
    b"[1, 2, 3]",
    b'{"s": 1, "e": "x"}',
    b"[" * 50_000,
    b'{"s": ' + b"9" * 5000 + b"}",
    b'{"s":99,"e":[{"t":"run_completed","c":null,"d":{"output":1}}],"r":{}}',
    b'{"s":1,"e":[{"t":"run_created","c":null,"d":{}}],"r":{}}',
]


async def _hook_active(engine: Engine, token: str) -> bool:
    hook = await engine.world.get_hook(token)
    return hook is not None and hook.active


@pytest.mark.parametrize("garbage", GARBAGE, ids=lambda g: repr(g[:12]))
async def test_a_poisoned_entry_fences_one_run_and_repair_resumes_it(
    engine: Engine, tmp_path: Path, garbage: bytes
) -> None:
    path = str(tmp_path / "count")
    async with engine.worker([flows.gated]):
        a = await engine.client.start(flows.gated, path, "tok-a")
        b = await engine.client.start(flows.gated, path, "tok-b")
        await wait_for(lambda: _hook_active(engine, "tok-a"))
        await wait_for(lambda: _hook_active(engine, "tok-b"))
        seq = await poison_log(engine.world, a.run_id, garbage)

        # typed errors naming run, entry and why, from every reader
        reader = await engine.make_world()  # a fresh process's view, nothing cached
        for world in (engine.world, reader):
            client = wayline.Client(world)
            with pytest.raises(CorruptLogError) as info:
                await client.get_run(a.run_id) if world is reader else await world.list_events(
                    a.run_id
                )
            assert info.value.run_id == a.run_id and info.value.seq == seq
            assert info.value.code == "CORRUPT_LOG" and info.value.why
            with pytest.raises(CorruptLogError):
                await client.resume_hook("tok-a", {"ok": 1})
            with pytest.raises(CorruptLogError):
                await client.cancel(a.run_id)
        listed = {r.run_id: r for r in await reader.list_runs()}
        assert listed[a.run_id].status is wayline.RunStatus.CORRUPT
        assert listed[b.run_id].status is wayline.RunStatus.RUNNING
        corrupt = await reader.list_runs(status=wayline.RunStatus.CORRUPT)
        assert [r.run_id for r in corrupt] == [a.run_id]

        # a delivery naming the run is set aside with the reason, once, not retried
        await engine.world.enqueue(FLOW_TOPIC, {"runId": a.run_id, "reason": "poke"})

        async def set_aside() -> list[dict[str, object]]:
            return [
                d
                for d in await engine.world.list_dead_letters()
                if "CORRUPT_LOG" in str(d["reason"]) and a.run_id in str(d["reason"])
            ]

        dead = await wait_for(set_aside)
        assert dead[0]["attempts"] == 1

        # the other run is untouched
        await engine.client.resume_hook("tok-b", "b-payload")
        assert await b.result(timeout=15) == "b-payload"

        # repair: a readable entry is refused, the poisoned one removed, the run resumes
        with pytest.raises(wayline.WaylineError):
            await engine.client.repair_run(a.run_id, seq - 1)
        done = await engine.client.repair_run(a.run_id, seq)
        assert any(str(seq) in line for line in done)
        assert (await wayline.Client(reader).get_run(a.run_id)).status is wayline.RunStatus.RUNNING
        await engine.client.resume_hook("tok-a", "a-payload")
        assert await a.result(timeout=15) == "a-payload"
    assert flows.count(path, "before") == 2 and flows.count(path, "after") == 2
