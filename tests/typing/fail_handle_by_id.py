"""Must fail ``mypy --strict``: a handle found by id with its workflow keeps the result type."""

from __future__ import annotations

import wayline


@wayline.workflow
async def nap(hours: int) -> str:
    return "awake"


async def command(client: wayline.Client, run_id: str) -> None:
    hours: int = await client.handle(nap, run_id).result()  # E: Incompatible types in assignment (expression has type "str", variable has type "int")
    client.handle(run_id, nap)  # E: No overload variant of "handle" of "Client" matches argument types "str", "WorkflowDefinition[[int], str]"
    print(hours)
