"""A worker process for fault tests: ``python -m tests.faults.worker_main DB_PATH|NATS_URL``.

Runs every workflow of ``tests.runtime.flows``, ``fencing_flows``, ``slot_flows``,
``stream_flows`` and ``compensation_retry_flows`` on the embedded world (a path) or on JetStream
(a ``nats://`` URL, with ``WAYLINE_TEST_PREFIX``) until killed. Settings
come from the environment (WORKFLOW_INLINE_OWNERSHIP_LEASE_SECONDS, ...), plus three test knobs:
``WAYLINE_TEST_UNSTABLE_IDS=1`` wraps the world so every delivery gets a fresh message id,
``WAYLINE_TEST_EXIT_ON_DEADLINE=1`` makes the invocation bound exit the process (as
``wayline worker`` does), and ``WAYLINE_TEST_DIE_AFTER_STREAM_CLOSE=1`` makes the process
SIGKILL itself as soon as a step stream's ``close`` record is stored (before the step's
completion is recorded)."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
from typing import Any

import wayline
from tests.runtime import (
    compensation_retry_flows,
    fencing_flows,
    flows,
    slot_flows,
    stream_flows,
)
from tests.runtime.unstable import UnstableIdWorld
from wayline._core.definitions import WorkflowDefinition
from wayline.world import World


async def main(path: str) -> None:
    # flows.py keeps several revisions under one name (for the identity tests); serve the
    # last of each, as one deployment would
    named = {
        v.name: v
        for module in (flows, fencing_flows, slot_flows, stream_flows, compensation_retry_flows)
        for v in vars(module).values()
        if isinstance(v, WorkflowDefinition)
    }
    workflows = list(named.values())
    visibility = float(os.environ.get("WAYLINE_VISIBILITY_SECONDS", "30"))
    world: World
    if path.startswith("nats://"):
        from wayline.worlds.nats import NatsWorld

        world = NatsWorld(
            path, prefix=os.environ["WAYLINE_TEST_PREFIX"], visibility_seconds=visibility
        )
    else:
        world = wayline.LocalWorld(path, poll_interval=0.02, visibility_seconds=visibility)
    if os.environ.get("WAYLINE_TEST_UNSTABLE_IDS") == "1":
        world = UnstableIdWorld(world)
    if os.environ.get("WAYLINE_TEST_DIE_AFTER_STREAM_CLOSE") == "1":
        _die_after_stream_close(world)
    async with world:
        worker = wayline.Worker(
            world,
            workflows,
            exit_on_invocation_deadline=os.environ.get("WAYLINE_TEST_EXIT_ON_DEADLINE") == "1",
        )
        print("worker ready", flush=True)
        await worker.run()


def _die_after_stream_close(world: World) -> None:
    write = world.write_stream

    async def write_then_die(run_id: str, stream: str, records: Any) -> None:
        await write(run_id, stream, records)
        if any(r.get("kind") == "close" for r in records):
            os.kill(os.getpid(), signal.SIGKILL)

    world.write_stream = write_then_die  # type: ignore[method-assign]


if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    asyncio.run(main(sys.argv[1]))
