"""Workflows for the client-surface tests: input checked before a run exists, hooks waited
for, handles that cancel and wake."""

from __future__ import annotations

import wayline


@wayline.workflow
async def takes_list(items: list[str]) -> int:
    return len(items)


@wayline.workflow
async def starts_bad_child() -> str:
    try:
        await wayline.child(takes_list, "not a list")  # type: ignore[arg-type]
    except wayline.SerializationError as err:
        return err.message
    return "started"


@wayline.workflow
async def hook_rounds(token: str, rounds: int) -> list[str]:
    said: list[str] = []
    for _ in range(rounds):
        hook = wayline.create_hook(token, timeout="1h")
        said.append(str(await hook))
        hook.dispose()
    return said


@wayline.workflow
async def naps(hours: int) -> str:
    await wayline.sleep(hours * 3600)
    return "awake"
