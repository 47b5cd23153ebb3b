"""Adding a step to a live workflow (docs/durability.md, "Adding a step to a live workflow").

``order_v1`` is the workflow as first deployed; ``order_v2`` is the same workflow (same name)
after a fraud check was added inside ``wayline.patched("fraud-check")``. Both live in this one
module only so that a test can run them side by side: in an application, v2 replaces v1's code.

A v2 worker also serves the identity of v2's shape without the patched step, which is v1's
identity, so a run started on v1 and waiting for its approval finishes on v2 workers, taking
the old branch (``patched`` answers False on history written before it); a run started on v2
takes the new branch. ``tests/runtime/test_patched_steps.py`` runs this on both worlds.
"""

from __future__ import annotations

import wayline


@wayline.step(name="examples.order_reserve")
async def reserve(order: str) -> str:
    return f"reserved {order}"


@wayline.step(name="examples.order_check_fraud")
async def check_fraud(order: str) -> str:
    return f"fraud-checked {order}"


@wayline.step(name="examples.order_ship")
async def ship(order: str, approver: str) -> str:
    return f"shipped {order} ({approver})"


@wayline.workflow(name="examples.order_approval")
async def order_v1(order: str) -> list[str]:
    done = [await reserve(order)]
    approver: str = await wayline.create_hook(f"approve:{order}", type=str)
    done.append(await ship(order, approver))
    return done


@wayline.workflow(name="examples.order_approval")
async def order_v2(order: str) -> list[str]:
    done = [await reserve(order)]
    if wayline.patched("fraud-check"):
        done.append(await check_fraud(order))
    approver: str = await wayline.create_hook(f"approve:{order}", type=str)
    done.append(await ship(order, approver))
    return done
