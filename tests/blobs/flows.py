"""Workflows the out-of-line payload tests drive."""

from __future__ import annotations

from typing import Any

import wayline

MIB = 1024 * 1024


@wayline.step
async def sized(path: str, size: int) -> str:
    """A counter (one line per body that really ran) whose result is ``size`` characters."""
    with open(path, "a") as f:  # noqa: ASYNC230 - a tiny local marker file
        f.write("sized\n")
    return "r" * size


@wayline.step
async def measure(value: str) -> int:
    return len(value)


@wayline.workflow
async def big(path: str, blob: str, size: int) -> dict[str, int]:
    """Takes a large input, makes a large step result, passes it to a step, waits for a hook
    whose payload may be large, and returns a summary (small) of everything it saw."""
    result = await sized(path, size)
    seen = await measure(result)
    payload = await wayline.create_hook(f"tok-{path}")
    return {"input": len(blob), "result": len(result), "seen": seen, "hook": len(str(payload))}


@wayline.workflow
async def echo(blob: str) -> str:
    return blob


@wayline.workflow
async def sized_only(path: str, size: int) -> int:
    return len(await sized(path, size))


@wayline.step
async def same(value: object) -> object:
    return value


@wayline.workflow
async def echo_any(value: object) -> object:
    """Its step result and its output are the input, as top-level payloads."""
    return await same(value)


EMOJI = "\N{GRINNING FACE}" * 40000
"""40,000 characters, 480,002 bytes of JSON (``ensure_ascii`` writes each as 12)."""


@wayline.step
async def emoji(i: int) -> str:
    return EMOJI


@wayline.workflow
async def three_emoji() -> list[int]:
    """Three large results completing together: one batch, if none is stowed."""
    return [len(r) for r in await wayline.gather(emoji(1), emoji(2), emoji(3))]


KEPT: list[str] = []
"""The object :func:`kept` returns, which the test mutates after the step returned."""


@wayline.step
async def kept(n: int) -> Any:
    """Returns :data:`KEPT`; ``Any``: its value reaches the workflow as it was read."""
    KEPT[:] = ["k" * 1024 for _ in range(n)]
    return KEPT


@wayline.workflow
async def mutates(token: str, n: int) -> list[int]:
    """Mutates the large value its step returned between two hooks: every replay must still
    be given the value the log recorded."""
    value = await kept(n)
    first = len(value)
    await wayline.create_hook(f"{token}-1")
    value.append("workflow")
    await wayline.create_hook(f"{token}-2")
    return [first, len(value)]


@wayline.workflow
async def held(blob: str, token: str) -> int:
    """Waits on the hook ``token`` (so the run stays live), then returns its input's size."""
    await wayline.create_hook(token)
    return len(blob)
