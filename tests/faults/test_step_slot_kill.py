"""SIGKILL the holder of a step's concurrency slot mid-body: never more than ``max`` bodies at
once (the killed one ends at the kill), every run completes, each body is counted."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import wayline
from tests.runtime import slot_flows as sf
from tests.runtime.flows import lines, mark
from tests.runtime.harness import of_type, wait_for
from wayline._core.events import EventType


async def test_sigkill_of_a_slot_holder(tmp_path: Path, spawn_worker, crash_world) -> None:  # type: ignore[no-untyped-def]
    path = str(tmp_path / "marks")
    async with crash_world.open() as world:
        client = wayline.Client(world)
        # The doomed worker is alone until it holds a slot: two workers started together
        # left it none at load 8-21 (the other took every run, and the wait for the doomed
        # one to hold a slot ran out). The other one joins while it holds its slots, and it
        # is killed mid-body, at a start of its own with no end yet.
        doomed = spawn_worker(crash_world.arg, **crash_world.env)
        handles = [await client.start(sf.render_one, path, f"k{i}", 2.5) for i in range(5)]

        async def doomed_holds() -> bool:
            return bool(_mid_body(path, doomed.pid))

        await wait_for(doomed_holds, timeout=20)
        spawn_worker(crash_world.arg, **crash_world.env)
        await wait_for(doomed_holds, timeout=20)
        os.kill(doomed.pid, signal.SIGKILL)
        doomed.wait(timeout=10)
        mark(path, f"killed {doomed.pid}")
        results = [await h.result(timeout=90) for h in handles]
        events = [await h.events() for h in handles]
    assert results == [f"k{i}" for i in range(5)]
    assert sf.most_at_once(path) <= 2
    killed = _mid_body(path, doomed.pid)
    assert killed  # the killed process held at least one slot mid-body
    for i, run_events in enumerate(events):
        starts = of_type(run_events, EventType.STEP_STARTED)
        tag = f"k{i}"
        if tag in killed:  # killed mid-body, then run once more
            assert sf.runs_of(path, tag) == len(starts) == 2
        else:  # once (its attempt may have started in the killed process before its body)
            assert sf.runs_of(path, tag) == 1 and len(starts) in (1, 2)


def _mid_body(path: str, pid: int) -> set[str]:
    """The tags whose body process ``pid`` started and did not end."""
    started = {
        ln.split()[1] for ln in lines(path) if ln.startswith("start ") and ln.endswith(f" {pid}")
    }
    ended = {
        ln.split()[1] for ln in lines(path) if ln.startswith("end ") and ln.endswith(f" {pid}")
    }
    return started - ended
