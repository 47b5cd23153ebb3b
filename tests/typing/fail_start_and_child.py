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


@wayline.workflow
async def with_options(order_id: str) -> int:
    options = wayline.ChildOptions(timeout="1h")
    await wayline.child_with(options, kid, "one")  # E: Argument 3 to "child_with" has incompatible type "str"; expected "int"
    return await wayline.child_with(None, kid, 1)  # E: Argument 1 to "child_with" has incompatible type "None"


async def run_with_options(client: wayline.Client) -> None:
    options = wayline.StartOptions(id="o-1")
    await client.start_with(options, parent, 42)  # E: No overload variant of "start_with" of "Client" matches argument types "StartOptions", "WorkflowDefinition[[str], int]", "int"
    await client.start_with(options, parent, order_id="o", queue="eu")  # E: No overload variant of "start_with"
    wayline.StartOptions(id_reuse="sometimes")  # E: Argument "id_reuse" to "StartOptions" has incompatible type
    wayline.StartOptions(memo={"attempt": 2})  # E: Dict entry 0 has incompatible type "str": "int"
