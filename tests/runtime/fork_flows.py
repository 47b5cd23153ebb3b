"""Workflows for the fork and redrive tests. Each step body appends a line to a file (its
name and its idempotency key), so a test counts how often each body really ran; ``charge``
fails while the file ``broken`` exists, the stand-in for a bug fixed before a fork or a
redrive."""

from __future__ import annotations

from typing import Any

import pytest

import wayline
from tests.runtime.flows import mark
from tests.runtime.harness import file_exists


async def failed_run(
    client: wayline.Client, workflow: wayline.WorkflowDefinition[..., Any], path: str
) -> wayline.RunHandle[Any]:
    """A run of ``workflow`` that failed at its charge (the file ``broken`` exists, and is
    left for the caller to remove: the fix)."""
    mark(path + ".broken")
    handle = await client.start(workflow, path)
    with pytest.raises(wayline.RunFailedError):
        await handle.result(timeout=20)
    return handle


@wayline.step(name="fork_flows.reserve")
async def reserve(path: str, item: str) -> str:
    mark(path, f"reserve {item} {wayline.step_context().idempotency_key}")
    return f"reserved {item}"


@wayline.step(name="fork_flows.charge", max_retries=0)
async def charge(path: str, amount: int) -> str:
    ctx = wayline.step_context()
    mark(path, f"charge {amount} attempt-{ctx.attempt} {ctx.idempotency_key}")
    if await file_exists(path + ".broken")():
        raise wayline.FatalError("card declined")
    return f"charged {amount}"


@wayline.step(name="fork_flows.flaky_charge", max_retries=1, retry_delay=0.01)
async def flaky_charge(path: str, amount: int) -> str:
    """Retried once: it runs out of attempts while ``broken`` exists."""
    ctx = wayline.step_context()
    mark(path, f"flaky {amount} attempt-{ctx.attempt} {ctx.idempotency_key}")
    if await file_exists(path + ".broken")():
        raise RuntimeError("gateway timeout")
    return f"charged {amount}"


@wayline.step(name="fork_flows.ship")
async def ship(path: str) -> str:
    mark(path, f"ship {wayline.step_context().idempotency_key}")
    return "shipped"


@wayline.workflow(name="fork_flows.order")
async def order(path: str) -> list[str]:
    """reserve twice, then charge, then ship: ``reserve#2`` is the second reservation."""
    done = [await reserve(path, "book"), await reserve(path, "pen")]
    done.append(await charge(path, 12))
    done.append(await ship(path))
    return done


@wayline.workflow(name="fork_flows.flaky_order")
async def flaky_order(path: str) -> list[str]:
    return [await reserve(path, "book"), await flaky_charge(path, 7), await ship(path)]


@wayline.workflow(name="fork_flows.approved_order")
async def approved_order(path: str, token: str, dispose: bool) -> list[str]:
    """A hook answered before the charge; ``dispose``: freed once answered, else held until
    the run ends."""
    first = await reserve(path, "book")
    hook = wayline.create_hook(token)
    approval = await hook
    if dispose:
        hook.dispose()
    return [first, str(approval), await charge(path, 9)]


@wayline.workflow(name="fork_flows.slow_order")
async def slow_order(path: str, seconds: float) -> list[str]:
    """A run that sleeps between its reservation and its charge: live while it sleeps."""
    first = await reserve(path, "book")
    await wayline.sleep(seconds)
    return [first, await charge(path, 3)]


@wayline.workflow(name="fork_flows.nap_order")
async def nap_order(path: str) -> list[str]:
    """A completed sleep before the fork point: the fork reuses it as recorded."""
    first = await reserve(path, "book")
    await wayline.sleep(0.05)
    return [first, await charge(path, 5)]


@wayline.workflow(name="fork_flows.forgiving_order")
async def forgiving_order(path: str) -> list[str]:
    """Catches the charge's failure and then fails in its own code: the run failed outside
    a step, though a step of it failed."""
    try:
        await charge(path, 12)
    except wayline.StepFailedError:
        pass
    raise ValueError("no payment, no order")
