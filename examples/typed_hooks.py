"""Typed hooks: a pydantic model (or a dataclass) that subclasses ``wayline.Hook``.

    python examples/typed_hooks.py

Inside the workflow ``await Approval.wait(token, timeout=...)`` returns a validated
``Approval``; outside, ``await Approval.resume(client, token, Approval(...))`` delivers one. A
payload that does not validate is refused at ``resume`` with the field named (also through
``Client.resume_hook``, ``wayline hooks resume`` and a WorkflowHook resource, which check the
shape the hook recorded), and nothing is written. ``metadata=`` is shown by ``runs show``.
``client.wait_for_hook(token)`` returns once the run waits on the token, the moment to resume.
Each ``wait`` disposes its hook after the payload, so the run may wait on the token again.
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

import pydantic

import wayline


class Approval(wayline.Hook, pydantic.BaseModel):
    approved: bool
    by: str
    note: str = ""


@wayline.workflow(name="examples.expense")
async def expense(claim_id: str, amount: int) -> list[str]:
    approvers: list[str] = []
    rounds = 2 if amount > 1000 else 1  # big claims need two approvals, on the same token
    for i in range(rounds):
        approval = await Approval.wait(
            f"expense:{claim_id}", timeout="7d", metadata={"amount": amount, "round": i + 1}
        )
        if not approval.approved:
            return [f"rejected by {approval.by}"]
        approvers.append(approval.by)
    return approvers


async def main() -> tuple[str, list[str]]:
    with tempfile.TemporaryDirectory() as tmp:
        world = wayline.LocalWorld(Path(tmp) / "wayline.db")
        async with world, wayline.Worker(world, [expense]):
            client = wayline.Client(world)
            handle = await client.start(expense, "c-7", 2500)
            token = "expense:c-7"
            refused = ""
            for by in ("ana", "bo"):
                await client.wait_for_hook(token, timeout="30s")  # the run reached the hook
                if not refused:
                    try:
                        await Approval.resume(client, token, {"approved": "maybe", "by": by})
                    except wayline.InvalidPayloadError as err:
                        refused = err.message
                await Approval.resume(client, token, Approval(approved=True, by=by))
            return refused, await handle.result(timeout=30)


if __name__ == "__main__":
    refused, approvers = asyncio.run(main())
    print("refused:", refused)
    print("approved by:", ", ".join(approvers))
