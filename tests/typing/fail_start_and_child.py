"""Must fail ``mypy --strict``: a run or a child started with arguments its workflow refuses."""

from __future__ import annotations

import wayline


@wayline.workflow
async def kid(n: int) -> int:
    return n


@wayline.workflow
async def parent(order_id: str) -> int:
    await wayline.child(kid, "one")  # E: No overload variant of "child" matches argument types "WorkflowDefinition[[int], int]", "str"
    return await wayline.child(kid)  # E: No overload variant of "child" matches argument type "WorkflowDefinition[[int], int]"


async def run(client: wayline.Client) -> None:
    await client.start(parent, 42)  # E: No overload variant of "start" of "Client" matches argument types "WorkflowDefinition[[str], int]", "int"
    await client.start(parent)  # E: No overload variant of "start" of "Client" matches argument type "WorkflowDefinition[[str], int]"
    await client.start(parent, "o-1", id="o-1", id_reuse="sometimes")  # E: Unexpected keyword argument "id_reuse"
