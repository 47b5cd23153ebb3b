"""Every value that crosses the durable boundary has a documented limit, checked before
anything is written, with PAYLOAD_TOO_LARGE naming the size and the limit. On both worlds."""

from __future__ import annotations

from pathlib import Path

import pytest

import wayline
from tests.hostile import flows
from tests.runtime.harness import Engine, settings, wait_for
from wayline.errors import PayloadTooLargeError
from wayline.settings import Settings

LIMIT = 256 * 1024
TIGHT = settings(
    max_input_bytes=LIMIT,
    max_step_args_bytes=LIMIT,
    max_result_bytes=LIMIT,
    max_hook_payload_bytes=LIMIT,
)
"""Limits of 256 KiB (the defaults, 64 MiB, are exercised in tests/blobs)."""
OVER = 300 * 1024


def tight(engine: Engine) -> wayline.Client:
    return wayline.Client(engine.world, settings=TIGHT)


async def test_an_oversized_input_is_refused_before_a_run_exists(engine: Engine) -> None:
    with pytest.raises(PayloadTooLargeError) as info:
        await tight(engine).start(flows.returns, "ignored " * 40_000)  # type: ignore[arg-type]
    err = info.value
    assert err.code == "PAYLOAD_TOO_LARGE" and err.limit == LIMIT and err.size > err.limit
    assert "WAYLINE_MAX_INPUT_BYTES" in err.message and str(err.size) in err.message
    assert await engine.world.list_runs() == []


async def test_a_step_result_over_the_limit_fails_that_step_once(
    engine: Engine, tmp_path: Path
) -> None:
    path = str(tmp_path / "count")
    async with engine.worker([flows.oversized], settings=TIGHT):
        run = await tight(engine).start(flows.oversized, path, OVER, "result")
        out = await run.result(timeout=20)
    assert out.startswith("caught STEP_FAILED") and "over the limit of 262144 bytes" in out
    assert flows.count(path, "big") == 1  # refused, not run again


async def test_step_arguments_over_the_limit_are_refused_at_the_call(engine: Engine) -> None:
    async with engine.worker([flows.oversized], settings=TIGHT):
        run = await tight(engine).start(flows.oversized, "-", OVER, "args")
        stored = OVER + len('{"args":[""]}')  # the stored form: {"args": [value]}
        assert await run.result(timeout=20) == f"caught PAYLOAD_TOO_LARGE {stored} {LIMIT}"


async def test_a_run_output_over_the_limit_fails_the_run(engine: Engine) -> None:
    async with engine.worker([flows.returns], settings=TIGHT):
        run = await tight(engine).start(flows.returns, OVER)
        with pytest.raises(wayline.RunFailedError) as info:
            await run.result(timeout=20)
    assert info.value.cause.code == "PAYLOAD_TOO_LARGE"


async def test_an_oversized_hook_payload_is_refused_and_the_hook_still_waits(
    engine: Engine, tmp_path: Path
) -> None:
    path = str(tmp_path / "count")
    async with engine.worker([flows.gated], settings=TIGHT):
        run = await tight(engine).start(flows.gated, path, "big-hook")

        async def active() -> bool:
            hook = await engine.world.get_hook("big-hook")
            return hook is not None and hook.active

        await wait_for(active)
        before = len(await run.events())
        with pytest.raises(PayloadTooLargeError):
            await tight(engine).resume_hook("big-hook", "p" * OVER)
        assert len(await run.events()) == before
        await tight(engine).resume_hook("big-hook", "small")
        assert await run.result(timeout=15) == "small"


async def test_limits_come_from_settings(engine: Engine, tmp_path: Path) -> None:
    strict = Settings.from_env(
        {"WAYLINE_MAX_RESULT_BYTES": "2048", "WAYLINE_MAX_INPUT_BYTES": "4096"}
    )
    assert strict.max_result_bytes == 2048
    client = wayline.Client(engine.world, settings=strict)
    with pytest.raises(PayloadTooLargeError):
        await client.start(flows.returns, "w" * 5000)  # type: ignore[arg-type]
    path = str(tmp_path / "count")
    async with engine.worker([flows.oversized], settings=settings(max_result_bytes=2048)):
        run = await client.start(flows.oversized, path, 3000, "result")
        assert "over the limit of 2048 bytes" in await run.result(timeout=20)
    with pytest.raises(wayline.ConfigurationError):
        Settings.from_env({"WAYLINE_MAX_RESULT_BYTES": "12"})
