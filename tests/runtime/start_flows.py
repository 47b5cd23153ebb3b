"""Workflows for the start races: every step body appends ``NAME TAG`` to a side-channel file,
so how often each body ran survives the process that ran it."""

from __future__ import annotations

import wayline
from tests.runtime.flows import lines, mark

__all__ = ["lines", "mark"]


@wayline.step(max_retries=2, retry_delay=0.05)
async def st_body(path: str, tag: str) -> str:
    mark(path, f"body {tag}")
    return tag


@wayline.workflow
async def st_counted(path: str, tag: str) -> str:
    """One step whose body marks ``tag``; the run's result is the tag it was started with."""
    return await st_body(path, tag)


WORKFLOWS = [st_counted]
