"""``Client.wait_for_hook``: returns once a run waits on a token, on every world, so a caller
resumes at the right moment instead of polling the world."""

from __future__ import annotations

from datetime import timedelta

import pytest

import wayline
from tests.runtime import client_flows
from tests.runtime.harness import Engine

pytestmark = pytest.mark.engine_logic  # docs/testing.md, "The pyramid"


async def test_wait_for_hook_returns_each_wait_of_a_run(engine: Engine) -> None:
    client = engine.client
    async with engine.worker([client_flows.hook_rounds]):
        handle = await client.start(client_flows.hook_rounds, "tok", 2)
        first = await client.wait_for_hook("tok", timeout="10s")
        assert isinstance(first, wayline.HookInfo)
        assert (first.run_id, first.token, first.active) == (handle.run_id, "tok", True)
        await client.resume_hook("tok", "ana")
        # the first hook may hold the token still (received, not yet disposed): it is no wait
        second = await client.wait_for_hook("tok", timeout=timedelta(seconds=10))
        assert second.correlation_id != first.correlation_id
        await client.resume_hook("tok", "bo")
        assert await handle.result(timeout=10) == ["ana", "bo"]


async def test_wait_for_hook_times_out_with_a_typed_error(engine: Engine) -> None:
    with pytest.raises(wayline.HookWaitTimeoutError, match="'nobody'") as err:
        await engine.client.wait_for_hook("nobody", timeout=0.2)
    assert err.value.code == "HOOK_WAIT_TIMEOUT"
    with pytest.raises(ValueError, match="not a duration"):
        await engine.client.wait_for_hook("nobody", timeout="soon")


async def test_wait_for_hook_of_a_namespace_sees_only_its_runs(engine: Engine) -> None:
    async with engine.worker([client_flows.hook_rounds]):
        handle = await engine.client.start(client_flows.hook_rounds, "shared", 1)
        await engine.client.wait_for_hook("shared", timeout=10)  # no namespace: sees it
        team = wayline.Client(engine.world, namespace="team-a")
        with pytest.raises(wayline.HookWaitTimeoutError):
            await team.wait_for_hook("shared", timeout="300ms")
        await engine.client.resume_hook("shared", "x")
        assert await handle.result(timeout=10) == ["x"]
