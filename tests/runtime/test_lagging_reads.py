"""A worker whose read does not show yet what its message names: the run of a start, the step
of a step message. On a replicated NATS world any replica answers a read (a direct get), also
one that has not applied the write made before the message (JetStream promises no
read-after-write there). The message is read again on its next delivery, not set aside: a run
set aside at its start would wait for good. The lag is played by the world's ``read_run``
answering from before the write, once, on both worlds."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.runtime import timeout_flows
from tests.runtime.flows import lines
from tests.runtime.harness import Engine
from wayline import StartOptions
from wayline._core.events import EventType
from wayline._core.ids import new_run_id


def _lagging(
    monkeypatch: pytest.MonkeyPatch, engine: Engine, run_id: str, *, step: bool
) -> list[str]:
    """The first read of ``run_id`` (with ``step``: the first after its step message was sent)
    answers as a replica behind that write would; the reads so played are listed."""
    world = engine.world
    real = world.read_run
    played: list[str] = []

    async def read_run(rid: str, *args: Any, **kwargs: Any) -> Any:
        info, events = await real(rid, *args, **kwargs)
        if rid != run_id or played:
            return info, events
        if not step:
            played.append("no run")
            return None, []
        created = [e for e in events if e.type is EventType.STEP_CREATED]
        if not created:
            return info, events
        played.append("no step")
        cut = min(e.seq for e in created)
        return info, [e for e in events if e.seq < cut]

    async def read_run_at(rid: str, mark: str) -> Any:  # a marked start reads here too
        return await read_run(rid)

    monkeypatch.setattr(world, "read_run", read_run)
    monkeypatch.setattr(world, "read_run_at", read_run_at)
    return played


@pytest.mark.parametrize("step", [False, True], ids=["start", "queued step"])
async def test_a_message_read_before_its_write_shows_is_read_again(
    engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, step: bool
) -> None:
    path = str(tmp_path / "ledger")
    run_id = new_run_id()
    played = _lagging(monkeypatch, engine, run_id, step=step)
    async with engine.worker([timeout_flows.long_run]):
        handle = await engine.client.start_with(
            StartOptions(run_id=run_id), timeout_flows.long_run, path, 0.05
        )
        assert await handle.result(timeout=30) == "long done"
    assert played == (["no step"] if step else ["no run"])
    assert await engine.world.list_dead_letters(limit=100) == []
    started = [line for line in lines(path) if line.startswith("start long")]
    assert len(started) == 1, lines(path)
