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


@wayline.workflow(name="versioned_parent")
async def versioned_parent(path: str, token: str) -> str:
    return await wayline.child(versioned_v1, path, token)


# Two versions that part before a wait which also has a timer (a hook's timeout, a sleep), so
# that a run blocked by the divergence still has a delayed wake stored when it is rolled back.
@wayline.workflow(name="timed")
async def timed_v1(path: str, token: str, timeout: str) -> str:
    a = await note(path, "a")
    try:
        answer = await wayline.create_hook(token, timeout=timeout)
    except wayline.HookTimeout:
        answer = "timed out"
    b = await note(path, "b")
    return f"v1:{a}:{answer}:{b}"


@wayline.workflow(name="timed")
async def timed_v2(path: str, token: str, timeout: str) -> str:
    a = await note(path, "a")
    await note(path, "extra")
    answer = await wayline.create_hook(token, timeout=timeout)
    b = await note(path, "b")
    return f"v2:{a}:{answer}:{b}"


@wayline.workflow(name="two_waits")
async def two_waits_v1(path: str, token: str, second: str, timeout: str) -> str:
    a = await note(path, "a")
    first = wayline.create_hook(token)
    if second == "sleep":
        later: object = wayline.sleep(timeout)
    else:
        later = wayline.create_hook(second, timeout=timeout)
    try:
        answer, other = await wayline.gather(first, later)
    except wayline.HookTimeout:
        answer, other = "?", "timed out"
    b = await note(path, "b")
    return f"v1:{a}:{answer}:{other}:{b}"


@wayline.workflow(name="two_waits")
async def two_waits_v2(path: str, token: str, second: str, timeout: str) -> str:
    a = await note(path, "a")
    await note(path, "extra")
    first = wayline.create_hook(token)
    if second == "sleep":
        later: object = wayline.sleep(timeout)
    else:
        later = wayline.create_hook(second, timeout=timeout)
    answer, other = await wayline.gather(first, later)
    b = await note(path, "b")
    return f"v2:{a}:{answer}:{other}:{b}"
