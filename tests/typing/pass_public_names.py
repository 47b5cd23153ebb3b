"""Must pass ``mypy --strict``: what a user annotates with comes from ``wayline`` itself, and
the NATS world (imported lazily at run time) is a class to the type checker."""

from __future__ import annotations

from datetime import timedelta
from typing import Any, assert_type

import wayline
from wayline import (
    Duration,
    HookHandle,
    HookInfo,
    RetryPolicy,
    RunHandle,
    RunInfo,
    RunStatus,
    StepDefinition,
    WorkflowDefinition,
)


def nats_world() -> wayline.World:
    world = wayline.NatsWorld("nats://127.0.0.1:4222", prefix="orders", replicas=1)
    assert_type(world, wayline.NatsWorld)
    return world


async def describe(client: wayline.Client, run_id: str) -> str:
    info: RunInfo = await client.get_run(run_id)
    status: RunStatus = info.status
    handle: RunHandle[Any] = client.handle(run_id)
    hooks: list[HookInfo] = []
    return f"{status} {handle.run_id} {len(hooks)}"


def annotated(
    wait: Duration,
    hook: HookHandle[int],
    policy: RetryPolicy,
    step: StepDefinition[[str], int],
    flow: WorkflowDefinition[[str], None],
) -> None:
    print(wait, hook, policy, step, flow)


annotated_wait: Duration = timedelta(seconds=2)
