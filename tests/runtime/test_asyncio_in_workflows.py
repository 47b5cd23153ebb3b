"""asyncio's own concurrency in a workflow (``asyncio.gather``, ``ensure_future``,
``create_task`` over wayline calls) is not durable: the run fails clearly
(``NON_DETERMINISTIC_AWAIT``, naming what to use), on both worlds, and nothing else is left
behind: no task stepping a wayline future ("Task got bad yield"), no future whose error
asyncio logs as never retrieved, no step body run."""

from __future__ import annotations

import asyncio
import gc
import logging
from pathlib import Path

import pytest

import wayline
from tests.runtime.flows import lines, mark
from tests.runtime.harness import Engine

pytestmark = pytest.mark.engine_logic  # docs/testing.md, "The pyramid"


@wayline.step(name="aio.mark")
async def aio_mark(path: str, tag: str) -> str:
    mark(path, tag)
    return tag


@wayline.workflow(name="aio.gathered")
async def aio_gathered(path: str) -> list[str]:
    return list(await asyncio.gather(aio_mark(path, "a"), aio_mark(path, "b")))


@wayline.workflow(name="aio.future")
async def aio_future(path: str) -> str:
    return await asyncio.ensure_future(aio_mark(path, "c"))


@pytest.mark.parametrize("workflow", [aio_gathered, aio_future])
async def test_asyncio_concurrency_in_a_workflow_fails_the_run_and_leaves_nothing_behind(
    engine: Engine, tmp_path: Path, caplog: pytest.LogCaptureFixture, workflow: object
) -> None:
    path = str(tmp_path / "marks")
    caplog.set_level(logging.ERROR, logger="asyncio")
    async with engine.worker([workflow]):  # type: ignore[list-item]
        handle = await engine.client.start(workflow, path)  # type: ignore[call-overload]
        with pytest.raises(wayline.RunFailedError) as failed:
            await handle.result(timeout=20)
    assert "NON_DETERMINISTIC_AWAIT" in str(failed.value), failed.value
    assert "which is not durable" in str(failed.value)
    await asyncio.sleep(0.1)
    gc.collect()  # asyncio logs a never-retrieved error when the future is collected
    await asyncio.sleep(0)
    logged = [r.getMessage() for r in caplog.records if r.name == "asyncio"]
    assert not [m for m in logged if "bad yield" in m or "never retrieved" in m], logged
    assert lines(path) == []
