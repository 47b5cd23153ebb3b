"""Workflows the hostile-bytes tests drive."""

from __future__ import annotations

import wayline


@wayline.step
async def bump(path: str, label: str) -> str:
    """A counter: one line per body that really ran."""
    with open(path, "a") as f:  # noqa: ASYNC230 - a tiny local marker file
        f.write(label + "\n")
    return label


@wayline.workflow
async def gated(path: str, token: str) -> object:
    await bump(path, "before")
    payload = await wayline.create_hook(token)
    await bump(path, "after")
    return payload


def count(path: str, label: str) -> int:
    try:
        with open(path) as f:
            return sum(1 for line in f if line.strip() == label)
    except FileNotFoundError:
        return 0
