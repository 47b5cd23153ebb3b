"""Two versions of one workflow (same name, shape and revision; different order of calls), and
``wayline.patched`` on both sides of a change."""

from __future__ import annotations

import wayline
from tests.runtime.flows import mark


@wayline.step
async def note(path: str, what: str) -> str:
    mark(path, what)
    return what


@wayline.workflow(name="versioned")
async def versioned_v1(path: str, token: str) -> str:
    a = await note(path, "a")
    answer = await wayline.create_hook(token)
    b = await note(path, "b")
    return f"v1:{a}:{answer}:{b}"


@wayline.workflow(name="versioned")
async def versioned_v2(path: str, token: str) -> str:
    a = await note(path, "a")
    await note(path, "extra")  # added before the hook: old runs' logs disagree here
    answer = await wayline.create_hook(token)
    b = await note(path, "b")
    return f"v2:{a}:{answer}:{b}"


@wayline.workflow(name="patchy")
async def patchy_v1(path: str, token: str) -> str:
    await note(path, "a")
    answer = await wayline.create_hook(token)
    return f"v1:{answer}"


@wayline.workflow(name="patchy")
async def patchy_v2(path: str, token: str) -> str:
    await note(path, "a")
    if wayline.patched("extra-before-hook"):
        await note(path, "extra")
    answer = await wayline.create_hook(token)
    if wayline.patched("after-hook"):
        await note(path, "after")
    return f"v2:{answer}"
