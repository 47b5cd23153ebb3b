"""A workflow whose step says which process ran it, and counts how often its body ran (one
line per execution in the file named by ``WAYLINE_TEST_LEDGER``), for the supervisor tests."""

from __future__ import annotations

import asyncio
import os

import wayline


@wayline.step(name="pid_tests.where")
async def where(key: str, seconds: float) -> int:
    note(f"start:{key}")
    await asyncio.sleep(seconds)
    note(key)
    return os.getpid()


def note(line: str) -> None:
    with open(os.environ["WAYLINE_TEST_LEDGER"], "a") as ledger:
        ledger.write(f"{line}\n")


@wayline.workflow(name="pid_tests.which_process")
async def which_process(key: str, seconds: float) -> int:
    return await where(key, seconds)
