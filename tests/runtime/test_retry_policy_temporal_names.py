"""A ``RetryPolicy`` written with Temporal's field names retries as the same policy in Wayline's
names would, on every world: ``maximum_attempts`` counts the first attempt."""

from __future__ import annotations

from pathlib import Path

import pytest

import wayline
from tests.runtime import sdk_flows
from tests.runtime.flows import lines
from tests.runtime.harness import Engine

pytestmark = pytest.mark.engine_logic  # docs/testing.md, "The pyramid"


async def test_a_temporal_named_policy_runs_maximum_attempts_in_all(
    engine: Engine, tmp_path: Path
) -> None:
    path = str(tmp_path / "attempts")
    async with engine.worker([sdk_flows.temporal_named_flow]):
        handle = await engine.client.start(sdk_flows.temporal_named_flow, path)
        with pytest.raises(wayline.RunFailedError, match="attempt 3 of 3, retries exhausted"):
            await handle.result(timeout=15)
    assert len(lines(path)) == 3  # maximum_attempts=3: the first try and two retries
