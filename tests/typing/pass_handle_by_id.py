"""Must pass ``mypy --strict``: a handle found by id is typed by the workflow given with it."""

from __future__ import annotations

from typing import Any, assert_type

import wayline
from wayline import RunHandle


@wayline.workflow
async def nap(hours: int) -> str:
    return "awake"


async def command(client: wayline.Client, run_id: str) -> None:
    typed = client.handle(nap, run_id)
    assert_type(typed, RunHandle[str])
    assert_type(await typed.result(timeout=1.0), str)
    assert_type(client.handle(run_id), RunHandle[Any])
