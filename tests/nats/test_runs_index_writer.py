"""The runs index is written off the append's path (``runs_writer``): an append that moves a
run's status returns without publishing the run's entry, and a listing still reflects every
status the run went through, from any world process, also when the process that appended
was killed before its writer wrote anything."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import textwrap
from typing import Any

from tests.nats_fixtures import NatsServer, OpenWorlds
from wayline._core.events import EventType, NewEvent, RunStatus
from wayline._core.ids import new_run_id

_WF = "runs-writer-wf"


def _created() -> list[NewEvent]:
    return [NewEvent(EventType.RUN_CREATED, data={"workflow": _WF, "input": []})]


def _started() -> list[NewEvent]:
    return [NewEvent(EventType.RUN_STARTED, data={})]


def _completed() -> list[NewEvent]:
    return [NewEvent(EventType.RUN_COMPLETED, data={"output": 1})]


async def test_an_append_that_moves_a_status_does_not_publish_the_index_entry(
    open_nats_world: OpenWorlds, monkeypatch: Any
) -> None:
    from nats.aio.client import Client

    world = await open_nats_world()
    run_id = new_run_id()
    await world.append(run_id, _created(), expected_seq=0)
    assert await world.count_runs(workflow=_WF) == {RunStatus.PENDING: 1}  # written by now
    sent: list[str] = []
    publish = Client.publish

    async def recorded(self: Any, subject: str, *args: Any, **kwargs: Any) -> Any:
        sent.append(subject)
        return await publish(self, subject, *args, **kwargs)

    monkeypatch.setattr(Client, "publish", recorded)
    await world.append(run_id, _started(), expected_seq=1)
    on_the_path = list(sent)  # what the append sent before it returned
    index = f"{world.names.prefix}.ri."
    assert not [s for s in on_the_path if s.startswith(index) or "PURGE" in s], on_the_path
    page = await world.runs_page(after=None, limit=10, status=RunStatus.RUNNING)
    assert [r.run_id for r in page] == [run_id]


async def test_another_process_sees_every_status_a_run_goes_through(
    open_nats_world: OpenWorlds,
) -> None:
    """The console's world is not the worker's: it reads only what the writer wrote. Each
    status shows there within a bounded wait (no flush of the writer's world)."""
    writer, reader = await open_nats_world(), await open_nats_world()
    run_id = new_run_id()
    for seq, (events, status) in enumerate(
        (
            (_created(), RunStatus.PENDING),
            (_started(), RunStatus.RUNNING),
            (_completed(), RunStatus.COMPLETED),
        )
    ):
        await writer.append(run_id, events, expected_seq=seq)
        for _ in range(200):
            page = await reader.runs_page(after=None, limit=10, status=status, workflow=_WF)
            counts = await reader.count_runs(workflow=_WF)
            if [r.run_id for r in page] == [run_id] and counts == {status: 1}:
                break
            await asyncio.sleep(0.05)
        assert [r.run_id for r in page] == [run_id], status
        assert counts == {status: 1}


_APPENDER = textwrap.dedent(
    """
    import asyncio, os, sys

    from wayline._core.events import EventType, NewEvent
    from wayline.worlds.nats import NatsWorld

    async def main():
        world = NatsWorld(sys.argv[1], prefix=sys.argv[2])
        await world.start()
        run_id = sys.argv[3]
        created = NewEvent(EventType.RUN_CREATED, data={"workflow": sys.argv[4], "input": []})
        await world.append(run_id, [created], expected_seq=0)
        await world.count_runs(workflow=sys.argv[4])  # its pending entry is written
        await world.append(run_id, [NewEvent(EventType.RUN_STARTED, data={})], expected_seq=1)
        done = NewEvent(EventType.RUN_COMPLETED, data={"output": 1})
        await world.append(run_id, [done], expected_seq=2)
        print("appended", flush=True)
        await asyncio.sleep(3600)  # killed here: the writer may not have written anything

    asyncio.run(main())
    """
)


async def test_a_listing_reflects_a_run_whose_appender_was_killed(
    open_nats_world: OpenWorlds, nats_server: NatsServer
) -> None:
    """The appending process is killed as soon as its appends land, its entries written or
    not: the first page that shows the run repairs its entry from the log, and the status
    filter and the counts follow."""
    world = await open_nats_world()
    run_id = new_run_id()
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    child = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        _APPENDER,
        nats_server.url,
        world.prefix,
        run_id,
        _WF,
        stdout=asyncio.subprocess.PIPE,
        env=env,
    )
    try:
        assert child.stdout is not None
        line = await asyncio.wait_for(child.stdout.readline(), 60)
        assert line.strip() == b"appended"
    finally:
        os.kill(child.pid, signal.SIGKILL)  # only the process this test started
        await child.wait()
    page = await world.runs_page(after=None, limit=10, workflow=_WF)
    assert [(r.run_id, r.status) for r in page] == [(run_id, RunStatus.COMPLETED)]
    done = await world.runs_page(after=None, limit=10, status=RunStatus.COMPLETED)
    assert [r.run_id for r in done] == [run_id]
    assert await world.count_runs(workflow=_WF) == {RunStatus.COMPLETED: 1}
