"""Workflows for the SDK surface tests: metadata, ``any``, retry policies, typed hooks, time
skipping. Side effects are counted in files (see ``flows.mark``)."""

from __future__ import annotations

import asyncio
import dataclasses
import os
from datetime import timedelta
from typing import Any

import pydantic

import wayline
from tests.runtime.flows import lines, mark


@wayline.step
async def stamp_step() -> dict[str, Any]:
    ctx = wayline.step_context()
    assert ctx.started_at is not None
    return {"startedAt": ctx.started_at.isoformat(), "attempt": ctx.attempt}


@wayline.workflow(name="sdk-info", revision=3)
async def info_flow() -> dict[str, Any]:
    before = wayline.workflow_info()
    step = await stamp_step()
    after = wayline.workflow_info()
    return {
        "runId": before.run_id,
        "name": before.workflow_name,
        "revision": before.revision,
        "identity": before.definition_identity,
        "startedAt": before.started_at.timestamp(),
        "sameStart": before.started_at == after.started_at,
        "attempt": before.attempt,
        "step": step,
    }


@wayline.step(max_retries=0)
async def maybe_fail(path: str, name: str, fail: bool) -> str:
    mark(path, name)
    if fail:
        raise RuntimeError(f"{name} broke")
    return name


@wayline.workflow
async def any_flow(path: str, fails: list[bool]) -> Any:
    steps = [maybe_fail(path, f"p{i}", f) for i, f in enumerate(fails)]
    try:
        return await wayline.any(*steps)
    except wayline.AllFailedError as err:
        return {"allFailed": [str(e) for e in err.errors]}


FAST_BACKOFF = wayline.RetryPolicy(
    max_attempts=4, initial=0.05, backoff=2.0, max_interval=0.15, jitter=0.1
)


@wayline.step(retry=FAST_BACKOFF)
async def backoff_step(path: str, fail_times: int) -> int:
    mark(path)
    attempt = wayline.step_context().attempt
    if attempt <= fail_times:
        raise OSError(f"flaky {attempt}")
    return attempt


@wayline.workflow
async def backoff_flow(path: str, fail_times: int) -> int:
    return await backoff_step(path, fail_times)


@wayline.step(retry=wayline.RetryPolicy(max_attempts=5, initial=0.05, non_retryable=(ValueError,)))
async def picky_step(path: str, kind: str) -> str:
    mark(path)
    if kind == "value" and len(lines(path)) < 5:
        raise ValueError("bad input is not retried")
    if kind == "retry_after" and len(lines(path)) < 2:
        raise wayline.RetryableError("come back soon", retry_after=0.01)
    return kind


@wayline.workflow
async def picky_flow(path: str, kind: str) -> str:
    return await picky_step(path, kind)


class Approval(wayline.Hook, pydantic.BaseModel):
    approved: bool
    by: str


@dataclasses.dataclass
class Note(wayline.Hook):
    text: str


@wayline.workflow
async def approvals(order: str, rounds: int) -> list[Any]:
    """Waits on the same token ``rounds`` times: each wait disposes its hook, freeing it."""
    out: list[Any] = []
    for i in range(rounds):
        approval = await Approval.wait(
            f"approve:{order}", timeout="1h", metadata={"order": order, "round": i}
        )
        out.append([approval.approved, approval.by, type(approval).__name__])
    note = await Note.wait(f"note:{order}")
    out.append(note.text)
    return out


class Address(pydantic.BaseModel):
    city: str
    zip: int | None = None


class Shipment(wayline.Hook, pydantic.BaseModel):
    by: str
    to: Address
    alternative: Address | None = None


@wayline.workflow
async def shipped(order: str) -> list[Any]:
    shipment = await Shipment.wait(f"ship:{order}", timeout="1h")
    return [shipment.by, shipment.to.city, shipment.alternative]


@wayline.workflow
async def approval_times_out(order: str) -> str:
    try:
        await Approval.wait(f"late:{order}", timeout=0.2)
    except wayline.HookTimeout:
        pass
    again = await Approval.wait(f"late:{order}", timeout="1h")  # the token is free again
    return again.by


@wayline.workflow
async def untyped_dispose(token: str) -> list[Any]:
    hook = wayline.create_hook(token, metadata={"why": "legacy"})
    first = await hook
    hook.dispose()
    second = await wayline.create_hook(token)
    return [first, second]


@wayline.workflow
async def approval_once(order: str) -> str:
    approval = await Approval.wait(f"approve:{order}", metadata={"order": order})
    return approval.by


@wayline.step
async def note_time(path: str, label: str) -> float:
    mark(path, label)
    ctx = wayline.step_context()
    assert ctx.started_at is not None
    return ctx.started_at.timestamp()


@wayline.workflow
async def month_long(path: str) -> dict[str, float]:
    start = wayline.now()
    before = await note_time(path, "before")
    await wayline.sleep("30d")
    after = await note_time(path, "after")
    return {
        "slept": (wayline.now() - start).total_seconds(),
        "stepGap": after - before,
    }


@wayline.workflow
async def sleeps_an_hour() -> str:
    await wayline.sleep("1h")
    return "awake"


@wayline.step(retry=wayline.RetryPolicy(max_attempts=3, initial="1h", backoff=24.0))
async def slow_to_recover(path: str) -> int:
    mark(path)
    attempt = wayline.step_context().attempt
    if attempt < 3:
        raise OSError("down for maintenance")
    return attempt


@wayline.workflow
async def recovers_after_a_day(path: str) -> int:
    return await slow_to_recover(path)


@wayline.step(retry=wayline.RetryPolicy(max_attempts=3, initial=0.01))
async def produce(path: str, n: int, gate: str, crash_first: bool) -> int:
    out = wayline.stream("progress")
    attempt = wayline.step_context().attempt
    for i in range(n):
        await out.write({"i": i, "attempt": attempt})
        if i == 1 and gate:  # wait for the test's reader to have seen the first chunks
            while True:
                if os.path.exists(gate):  # noqa: ASYNC240 - a tiny marker file from the test
                    break
                await asyncio.sleep(0.01)
        if crash_first and attempt == 1 and i == 1:
            raise OSError("lost the encoder")
    mark(path, f"produced {attempt}")
    return n


@wayline.workflow
async def producer(path: str, n: int, gate: str = "", crash_first: bool = False) -> int:
    return await produce(path, n, gate, crash_first)


@wayline.step
def produce_sync(n: int) -> int:
    out = wayline.stream("lines")
    for i in range(n):
        out.write_sync(f"line {i}")
    return n


@wayline.workflow
async def sync_producer(n: int) -> int:
    return await produce_sync(n)


@wayline.workflow
async def writes_after_close(path: str) -> str:
    await produce(path, 1, "", False)
    try:
        await produce(path, 1, "", False)
    except wayline.StepFailedError as err:
        return str(err.error.get("code"))
    return "written"


@dataclasses.dataclass
class Order:
    customer: str
    tag: str


@wayline.step
async def enter(path: str, tag: str) -> None:
    mark(path, f"start {tag}")


@wayline.workflow(concurrency=wayline.Limit(key=lambda order, path: order.customer, max=1))
async def one_per_customer(order: Order, path: str) -> str:
    await enter(path, order.tag)
    await wayline.create_hook(f"hold:{order.tag}")
    return order.tag


@wayline.workflow
async def counted(token: str) -> int:
    """A hook typed by a plain class that is not an object (``create_hook(type=int)``)."""
    count: int = await wayline.create_hook(token, type=int)
    return count + 1


@wayline.workflow
async def listed(token: str) -> int:
    """A hook typed by an alias, not a class (``list[int]``): nothing is recorded to check a
    payload by at resume, so a bad one fails the run when it arrives."""
    values: list[int] = await wayline.create_hook(token, type=list[int])
    return sum(values)


@wayline.workflow
async def two_hooks(key: str) -> list[Any]:
    first = await wayline.create_hook(f"a:{key}")
    second = await wayline.create_hook(f"b:{key}")
    return [first, second]


@wayline.step(max_retries=0)
async def fail_after(path: str, name: str, seconds: float) -> str:
    mark(path, name)
    await asyncio.sleep(seconds)
    raise RuntimeError(f"{name} broke")


@wayline.workflow
async def gather_settled_flow(path: str) -> str:
    """Two branches that both failed before ``gather`` is called: the later argument failed
    first in the log."""
    slow = fail_after(path, "slow", 0.5)
    fast = fail_after(path, "fast", 0.0)
    await wayline.sleep("2s")
    try:
        await wayline.gather(slow, fast)
    except wayline.WaylineError as err:
        return str(err)
    return "no failure"


@wayline.workflow
async def waits_of(kind: str, duration: Any) -> str:
    """A sleep, hook timeout or child timeout of ``duration``; what the call said of it."""
    try:
        if kind == "sleep":
            await wayline.sleep(duration)
        elif kind == "hook":
            await wayline.create_hook(timeout=duration)
        else:
            await wayline.child_with(wayline.ChildOptions(timeout=duration), sleeps_an_hour)
    except ValueError as err:
        return f"refused: {err}"
    return "waited"


# Temporal's field names: 3 attempts in all (Temporal counts the first), 20 ms apart.
TEMPORAL_NAMED = wayline.RetryPolicy(
    maximum_attempts=3,
    initial_interval=timedelta(milliseconds=20),
    backoff_coefficient=1.0,
    maximum_interval="1s",
    non_retryable_error_types=["ValueError"],
)


@wayline.step(retry=TEMPORAL_NAMED)
async def temporal_named_step(path: str) -> None:
    mark(path)
    raise OSError(f"still down (attempt {wayline.step_context().attempt})")


@wayline.workflow
async def temporal_named_flow(path: str) -> None:
    await temporal_named_step(path)


@wayline.workflow
async def napping_flow() -> str:
    await wayline.sleep("1h")
    return "awake"


@wayline.workflow
async def prompt_flow(x: int) -> int:
    return x + 1
