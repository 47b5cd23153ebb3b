"""Self-fencing across worker processes (issue 16, item 2): two worker processes share a world;
a long run of short steps, and a step that overruns the bound, each run every body once at a
time, counted by start/end lines carrying each body's pid."""

from __future__ import annotations

from pathlib import Path

import wayline
from tests.runtime import fencing_flows as ff
from tests.runtime.harness import of_type
from tests.runtime.test_fencing import assert_never_concurrent, bodies
from wayline._core.events import EventType

BOUND = {
    # The overrunning body (5.5 s) passes the bound; the short ones (0.4 s, handed off at
    # half the bound) stay well inside it on a loaded machine. At a 1.5 s bound and a 2 s
    # visibility, load 8-21 fenced deliveries of the short steps ("held 1.5s, past its
    # bound of 1.5s", "not renewed for 1.1s") and ran their bodies twice, one after the
    # other: the fencing was right, the bound too tight for the machine.
    "WAYLINE_MAX_INVOCATION_SECONDS": "3",
    "WORKFLOW_INLINE_OWNERSHIP_LEASE_SECONDS": "7",
    "WAYLINE_VISIBILITY_SECONDS": "3",
}


async def test_two_worker_processes_run_each_body_once_at_a_time(  # type: ignore[no-untyped-def]
    tmp_path: Path, spawn_worker, crash_world
) -> None:
    chain, over = str(tmp_path / "chain"), str(tmp_path / "over")
    env = {**crash_world.env, **BOUND}
    async with crash_world.open() as world:
        client = wayline.Client(world)
        workers = [spawn_worker(crash_world.arg, **env) for _ in range(2)]
        long_run = await client.start(ff.many_short_steps, chain, 10, 0.4)
        overrun = await client.start(ff.overrun, over, 5.5)
        assert await long_run.result(timeout=60) == 45
        assert await overrun.result(timeout=60) == "attempt 2"
        events = await overrun.events()
    assert all(w.poll() is None for w in workers)  # fenced, never exited
    runs = bodies(chain)
    assert {k: len(v) for k, v in runs.items()} == {f"s{i}": 1 for i in range(10)}, _logs(tmp_path)
    assert_never_concurrent(runs)
    runs = bodies(over)
    assert [how for _, _, how in sorted(runs["over"])] == ["cut", "end"]
    assert_never_concurrent(runs)
    [retrying] = of_type(events, EventType.STEP_RETRYING)
    assert retrying.data["error"]["code"] == "INVOCATION_FENCED"


def _logs(tmp_path: Path) -> str:
    return "\n".join(
        f"{log.name}: {log.read_text()[-2000:]}" for log in sorted(tmp_path.glob("worker-*.log"))
    )
