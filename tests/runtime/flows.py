"""Workflows the runtime tests drive. Side effects are counted in files, so a count survives
the process that made it (crash tests run these in worker subprocesses too)."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from pathlib import Path

import pydantic

import wayline
from tests.runtime import flow_parts


def mark(path: str, text: str = "x") -> None:
    with open(path, "a") as fh:
        fh.write(text + "\n")


def lines(path: str | Path) -> list[str]:
    p = Path(path)
    return p.read_text().splitlines() if p.exists() else []


@wayline.step
async def add(a: int, b: int) -> int:
    return a + b


@wayline.step
async def noop(i: int) -> int:
    return i


@wayline.workflow
async def chain(n: int) -> int:
    total = 0
    for i in range(n):
        total = await add(total, i)
    return total


@wayline.step
async def slow_marker(path: str, seconds: float) -> str:
    """The #2780 repro body: one marker line per execution, then a long body."""
    mark(path, f"attempt {wayline.step_context().attempt}")
    await asyncio.sleep(seconds)
    return "done"


@wayline.workflow
async def hook_during_step(path: str, seconds: float = 1.5) -> list[object]:
    hook = wayline.create_hook(f"mid-step:{path}")
    result, payload = await wayline.gather(slow_marker(path, seconds), hook)
    return [result, payload]


@wayline.workflow
async def sleep_during_step(path: str, seconds: float = 1.5) -> str:
    # race(step, sleep): the wake comes in a separate delivery while the step keeps its own
    index, _ = await wayline.race(slow_marker(path, seconds), wayline.sleep(0.3))
    return "sleep won" if index == 1 else "step won"


@wayline.step
def blocking_marker(path: str, seconds: float) -> str:
    """A plain-def step (runs in a thread) for crash tests: mark, then block."""
    mark(path, f"attempt {wayline.step_context().attempt}")
    time.sleep(seconds)
    return "finished"


@wayline.step
def count_step(path: str, label: str) -> str:
    mark(path, label)
    return label


@wayline.workflow
async def crashy(path: str, seconds: float) -> list[str]:
    a = await count_step(path, "before")
    b = await blocking_marker(path, seconds)
    c = await count_step(path, "after")
    return [a, b, c]


@wayline.step(max_retries=3, retry_delay=0.05)
def flaky(path: str, fail_times: int) -> int:
    ctx = wayline.step_context()
    mark(path, f"{ctx.attempt}:{ctx.idempotency_key}")
    if ctx.attempt <= fail_times:
        raise RuntimeError(f"transient failure {ctx.attempt}")
    return ctx.attempt


@wayline.workflow
async def retrying(path: str, fail_times: int) -> int:
    return await flaky(path, fail_times)


@wayline.step(max_retries=0)
def fatal_step() -> None:
    raise wayline.FatalError("card declined")


@wayline.workflow
async def catches_failure() -> str:
    try:
        await fatal_step()
    except wayline.StepFailedError as err:
        return f"caught: {err.error['message']}"
    return "not reached"


@wayline.workflow
async def fails() -> None:
    await fatal_step()


@dataclasses.dataclass
class Point:
    x: int
    y: int


class Approval(pydantic.BaseModel):
    approved: bool
    by: str


@wayline.step
async def move(p: Point, dx: int) -> Point:
    assert isinstance(p, Point)
    return Point(p.x + dx, p.y)


@wayline.workflow
async def typed(p: Point) -> dict[str, object]:
    moved = await move(p, 2)
    assert isinstance(moved, Point)
    approval = await wayline.create_hook(f"typed:{p.x}", type=Approval)
    assert isinstance(approval, Approval)
    return {"moved": dataclasses.asdict(moved), "by": approval.by}


@wayline.workflow
async def hook_timeout(token: str) -> str:
    try:
        await wayline.create_hook(token, timeout="300ms")
    except wayline.HookTimeout:
        return "timed out"
    return "got payload"


@wayline.step
async def echo(value: object) -> object:
    return value


@wayline.workflow
async def bad_argument() -> object:
    return await echo(object())


@wayline.workflow
async def uses_asyncio_sleep() -> None:
    await asyncio.sleep(0.01)


@wayline.workflow
async def deterministic() -> list[object]:
    before = [wayline.now().timestamp(), wayline.random(), str(wayline.uuid4())]
    await noop(1)
    after = wayline.now().timestamp()
    return [*before, after]


@wayline.workflow
async def fan_out(n: int) -> list[int]:
    return list(await wayline.gather(*(add(i, i) for i in range(n))))


@wayline.workflow
async def sleeper(seconds: float) -> float:
    start = wayline.now().timestamp()
    await wayline.sleep(seconds)
    return wayline.now().timestamp() - start


@wayline.workflow
async def long_step_then_hook(path: str, seconds: float) -> str:
    await slow_marker(path, seconds)
    await wayline.create_hook(f"after:{path}")
    return "ok"


@wayline.workflow
async def single_slow(path: str, seconds: float) -> str:
    return str(await slow_marker(path, seconds))


@wayline.step(max_retries=2, retry_delay=1.0)
async def slow_then_fail_once(path: str) -> str:
    attempt = wayline.step_context().attempt
    mark(path, f"attempt {attempt}")
    await asyncio.sleep(0.6)
    if attempt == 1:
        raise RuntimeError("first attempt fails")
    return "ok"


@wayline.workflow
async def retry_under_backstop(path: str) -> list[object]:
    hook = wayline.create_hook(f"retry:{path}")
    return list(await wayline.gather(slow_then_fail_once(path), hook))


@wayline.step(max_retries=2, retry_delay=0.5)
async def long_fail_once(path: str, seconds: float) -> str:
    attempt = wayline.step_context().attempt
    mark(path, f"attempt {attempt}")
    await asyncio.sleep(seconds)
    if attempt == 1:
        raise RuntimeError("first attempt fails")
    return "ok"


@wayline.workflow
async def outlives_lease(path: str, seconds: float) -> list[object]:
    hook = wayline.create_hook(f"outlive:{path}")
    return list(await wayline.gather(long_fail_once(path, seconds), hook))


def _record(path: str, text: str) -> None:
    mark(path, text)


def refund(path: str, order: str) -> None:
    ctx = wayline.step_context()
    assert ctx.direction == "compensate"
    mark(
        path,
        f"refund {order} key={ctx.idempotency_key} fwd={ctx.forward_idempotency_key} "
        f"result={ctx.forward_result}",
    )


@wayline.step(compensate=refund)
def charge_card(path: str, order: str) -> str:
    mark(path, f"charge {order} key={wayline.step_context().idempotency_key}")
    return f"ch_{order}"


def release(path: str, order: str) -> None:
    mark(path, f"release {order}")


@wayline.step(compensate=release)
def reserve(path: str, order: str) -> str:
    mark(path, f"reserve {order}")
    return "reserved"


@wayline.step(max_retries=0)
def ship_fails(path: str, order: str) -> None:
    mark(path, f"ship {order}")
    raise wayline.FatalError("no courier")


@wayline.workflow
async def saga(path: str, order: str) -> str:
    await reserve(path, order)
    await charge_card(path, order)
    await ship_fails(path, order)
    return "shipped"


@wayline.step
def refund_step(path: str, order: str) -> None:
    """A compensation handler that is a step of its own as well."""
    refund(path, order)


@wayline.step(compensate=refund_step)
def charge_with_step_refund(path: str, order: str) -> str:
    mark(path, f"charge {order} key={wayline.step_context().idempotency_key}")
    return f"ch_{order}"


@wayline.workflow
async def saga_step_refund(path: str, order: str) -> str:
    await charge_with_step_refund(path, order)
    await ship_fails(path, order)
    return "shipped"


@wayline.workflow
async def saga_waits(path: str, order: str) -> str:
    await reserve(path, order)
    await charge_card(path, order)
    await wayline.create_hook(f"saga:{order}")
    return "done"


STUCK_FLAG = "stuck-flag"


def flaky_release(path: str, order: str) -> None:
    from pathlib import Path as _P

    mark(path, f"try release {order}")
    if (_P(path).parent / STUCK_FLAG).exists():
        raise wayline.FatalError("warehouse offline")


@wayline.step(compensate=flaky_release)
def reserve_stuck(path: str, order: str) -> str:
    mark(path, f"reserve {order}")
    return "reserved"


@wayline.workflow
async def saga_stuck(path: str, order: str) -> str:
    await reserve_stuck(path, order)
    await ship_fails(path, order)
    return "shipped"


@wayline.workflow
async def kid(n: int) -> int:
    return await add(n, 100)


@wayline.workflow
async def kid_fails() -> None:
    await fatal_step()


@wayline.workflow
async def kid_waits(token: str) -> object:
    return await wayline.create_hook(token)


@wayline.workflow
async def hook_kept(token: str) -> object:
    """Holds its hook's token after the first payload (a second one would be kept too)."""
    hook = wayline.create_hook(token)
    first = await hook
    await wayline.sleep("1h")
    return first


@wayline.workflow
async def parent(n: int) -> list[object]:
    a = await wayline.child(kid, n)
    try:
        await wayline.child(kid_fails)
    except wayline.ChildFailedError as err:
        b = f"child failed: {err.status}"
    return [a, b]


@wayline.workflow
async def parent_waits(token: str) -> object:
    return await wayline.child(kid_waits, token)


@wayline.workflow
async def parent_deadline(token: str, catch: bool) -> str:
    try:
        await wayline.child_with(wayline.ChildOptions(timeout="400ms"), kid_waits, token)
    except wayline.ChildTimeoutError:
        if catch:
            return "timed out"
        raise
    return "child answered"


@wayline.workflow
async def kid_unwinds_stuck(path: str, token: str) -> object:
    """Waits on a hook after a step whose compensation fails while ``STUCK_FLAG`` exists:
    cancelled, it parks its own unwind for a person and does not end."""
    await reserve_stuck(path, token)
    return await wayline.create_hook(token)


@wayline.workflow
async def parent_deadline_stuck(path: str, token: str) -> object:
    return await wayline.child_with(
        wayline.ChildOptions(timeout="400ms"), kid_unwinds_stuck, path, token
    )


@wayline.workflow(name="versioned", revision=1)
async def versioned_v1(n: int) -> str:
    return f"v1:{await add(n, 1)}"


@wayline.workflow(name="versioned", revision=2)
async def versioned_v2(n: int) -> str:
    return f"v2:{await add(n, 2)}"


@wayline.workflow(name="pinned", revision=1)
async def pinned_v1(token: str) -> str:
    return f"v1:{await wayline.create_hook(token)}"


@wayline.workflow(name="pinned", revision=2)
async def pinned_v2(token: str) -> str:
    return f"v2:{await wayline.create_hook(token)}"


@wayline.workflow(name="strict", strict_identity=True)
async def strict_a(n: int) -> str:
    return f"a:{await add(n, 0)}"


@wayline.workflow(name="strict", strict_identity=True)
async def strict_b(n: int) -> str:
    return "b:" + str(await add(n, 0))


@wayline.step
async def loop_step(path: str, i: int, block_at: int, seconds: float) -> int:
    attempt = wayline.step_context().attempt
    mark(path, f"{i}:{attempt}")
    if i == block_at and attempt == 1:
        await asyncio.sleep(seconds)
    return i


@wayline.workflow
async def looping(path: str, n: int, block_at: int, seconds: float) -> int:
    total = 0
    for i in range(n):
        if await loop_step(path, i, block_at, seconds) % 2 == 0:  # a journaled branch
            total += i
    return total


@wayline.step
async def group_member(path: str, i: int, block: int, seconds: float) -> int:
    attempt = wayline.step_context().attempt
    mark(path, f"{i}:{attempt}")
    if i == block and attempt == 1:
        await asyncio.sleep(seconds)
    return i


@wayline.workflow
async def parallel_group(path: str, block: int, seconds: float) -> list[int]:
    return list(await wayline.gather(*(group_member(path, i, block, seconds) for i in range(5))))


@wayline.step
async def counted(path: str, i: int) -> int:
    mark(path, str(i))
    await asyncio.sleep(0.02)
    return i


@wayline.workflow
async def many_steps(path: str, n: int, nap: float) -> int:
    total = 0
    for i in range(n):
        total += await counted(path, i)
        if i == n // 2:
            await wayline.sleep(nap)
    return total


async def _helper_calls_reserve(path: str) -> str:
    return str(await reserve(path, "via-helper"))


@wayline.workflow
async def uses_helper(path: str) -> str:
    return await _helper_calls_reserve(path)


@wayline.workflow
async def uses_other_module(amount: int) -> int:
    charged = await flow_parts.part_charge(amount)
    return charged + await flow_parts.settle(amount)


@wayline.workflow
async def uses_class_attribute(amount: int) -> int:
    return await flow_parts.Billing.charge(amount)


@wayline.workflow
async def timed_chain(path: str, n: int) -> list[float]:
    """Reads workflow time right after each step (the completion is then still unwritten)."""
    seen: list[float] = []
    for i in range(n):
        await count_step(path, f"step {i}")
        seen.append(wayline.now().timestamp())
    return seen


@wayline.workflow
async def step_then_sleep(path: str) -> str:
    await count_step(path, "before")
    await wayline.sleep(0.2)
    return await count_step(path, "after")


@wayline.workflow
async def race_hook_and_step(path: str, token: str, seconds: float) -> list[object]:
    """In log order the hook wins (its payload lands while the step runs); a replay that saw
    the step's completion first would take the other branch."""
    slow = slow_marker(path, seconds)
    index, value = await wayline.race(wayline.create_hook(token), slow)
    await count_step(path, "step branch" if index == 1 else "hook branch")
    return [index, value, await slow]


async def _refund_charge(path: str, seconds: float) -> None:
    result = wayline.step_context().forward_result
    mark(path, "compensate" if result is not None else "compensate unknown")


@wayline.step(compensate=_refund_charge)
async def slow_charge(path: str, seconds: float) -> str:
    mark(path, "forward-start")
    await asyncio.sleep(seconds)
    mark(path, "forward-end")
    return "ch_1"


@wayline.workflow
async def pay_then_wait(path: str, seconds: float) -> str:
    """A compensable step mid-body when a cancel lands (issue: no refund before the charge)."""
    await slow_charge(path, seconds)
    return str(await wayline.create_hook(f"pay:{path}"))


@wayline.step(compensate=_refund_charge, max_retries=2, retry_delay=0.05)
async def slow_charge_second_try(path: str, seconds: float) -> str:
    """Fails its first (inline) attempt, so the second runs from the step queue (a bare,
    queue-owned start: no lease in the log)."""
    if wayline.step_context().attempt == 1:
        raise RuntimeError("the first attempt fails")
    mark(path, "forward-start")
    await asyncio.sleep(seconds)
    mark(path, "forward-end")
    return "ch_1"


@wayline.workflow
async def pay_on_retry_then_wait(path: str, seconds: float) -> str:
    """The soak's interleaving: a cancel lands while a queued retry of the charge runs."""
    await slow_charge_second_try(path, seconds)
    return str(await wayline.create_hook(f"pay:{path}"))


async def _slow_release(path: str, seconds: float) -> None:
    mark(path, "release-start")
    await asyncio.sleep(seconds)
    mark(path, "release-end")


@wayline.step(compensate=_slow_release)
async def hold_stock(path: str, seconds: float) -> str:
    mark(path, "reserve")
    return "r_1"


async def _refund_retried(path: str, seconds: float) -> None:
    mark(path, "refund")


@wayline.step(compensate=_refund_retried, max_retries=2, retry_delay=1.0)
async def charge_after_a_pause(path: str, seconds: float) -> str:
    """Fails its first (inline) attempt; its retry comes from the step queue a second later."""
    mark(path, f"charge-{wayline.step_context().attempt}")
    if wayline.step_context().attempt == 1:
        raise RuntimeError("the first attempt fails")
    return "ch_2"


@wayline.workflow
async def reserve_then_charge(path: str, seconds: float) -> str:
    """A cancel lands while the charge's retry waits; the reservation's release is slow, so
    the run is still compensating when the retry's message arrives."""
    await hold_stock(path, seconds)
    await charge_after_a_pause(path, seconds)
    return str(await wayline.create_hook(f"pay:{path}"))


@wayline.step
def slow_marker_sync(path: str, seconds: float) -> str:
    """A sync body (run in a thread, which no fence can cancel)."""
    mark(path, f"attempt {wayline.step_context().attempt}")
    time.sleep(seconds)
    return "done"


@wayline.workflow
async def single_slow_sync(path: str, seconds: float) -> str:
    return str(await slow_marker_sync(path, seconds))


def undo_attempts(path: str, order: str) -> None:
    mark(path, f"undo {order} fwd={wayline.step_context().forward_result}")


@wayline.step(compensate=undo_attempts, max_retries=3, retry_delay="200ms")
async def fails_slowly(path: str, order: str) -> str:
    attempt = wayline.step_context().attempt
    mark(path, f"attempt {attempt}")
    await asyncio.sleep(0.8)
    raise RuntimeError(f"attempt {attempt} failed")


@wayline.workflow
async def saga_retrying(path: str, order: str) -> str:
    return await fails_slowly(path, order)


def undo_limited(path: str, order: str) -> None:
    mark(path, f"undo {order}")


@wayline.step(compensate=undo_limited, concurrency=wayline.Limit(max=1))
async def one_at_a_time(path: str, order: str) -> str:
    mark(path, f"forward {order}")
    await asyncio.sleep(1.5)
    return order


@wayline.workflow
async def saga_limited(path: str, order: str) -> str:
    return await one_at_a_time(path, order)


@wayline.workflow
async def hook_disposed_after_one(token: str) -> object:
    """Takes one payload, frees the token, and waits on."""
    hook = wayline.create_hook(token)
    first = await hook
    hook.dispose()
    await wayline.sleep("1h")
    return first
