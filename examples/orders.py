"""The Wayline demo: an order workflow that validates, charges, waits for a person's approval,
pauses, then ships.

    python examples/orders.py           # the demo (what `make demo` runs)

or drive it with the CLI::

    wayline run examples/orders.py:orders --input '{"order_id": "o-1", "customer": "ada",
        "items": [{"sku": "BOOK-42", "quantity": 1, "unit_price_cents": 1250}]}'
    wayline hooks resume approve:o-1 --payload '{"approved": true, "by": "grace"}'

The payment step calls a fake provider with the step's idempotency key
(``wayline.step_context().idempotency_key``, the same on every attempt and replay). The
provider loses the response to the first request for each key, like a flaky network, so the
step is retried, and the retry gets the charge already made instead of charging twice. A
rejected or expired approval refunds the charge; so does cancelling the run
(``wayline runs cancel RUN_ID``), through the charge step's compensation.
"""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import shutil
import sys
import time
from pathlib import Path

import pydantic

import wayline

try:  # imported as examples.orders
    from examples.payments import Charge, FakePaymentProvider
except ImportError:  # run as a script, or loaded as a file by the CLI
    from payments import Charge, FakePaymentProvider  # type: ignore[no-redef,import-not-found]


class Item(pydantic.BaseModel):
    sku: str
    quantity: int
    unit_price_cents: int


class Order(pydantic.BaseModel):
    order_id: str
    customer: str
    items: list[Item]
    currency: str = "EUR"


class Approval(pydantic.BaseModel):
    approved: bool
    by: str


class Shipment(pydantic.BaseModel):
    tracking_number: str
    carrier: str


class Summary(pydantic.BaseModel):
    order_id: str
    status: str  # shipped | rejected | expired
    charge_id: str
    amount_cents: int
    approved_by: str | None = None
    tracking_number: str | None = None


@wayline.step(name="orders.validate", max_retries=0)
def validate(order: Order) -> int:
    """The order's total in cents; a bad order fails the run at once (no retries)."""
    if not order.items:
        raise wayline.FatalError(f"order {order.order_id} has no items")
    for item in order.items:
        if item.quantity < 1 or item.unit_price_cents < 0:
            raise wayline.FatalError(f"order {order.order_id}: bad line for {item.sku}")
    return sum(item.quantity * item.unit_price_cents for item in order.items)


def refund_charge(order: Order, amount_cents: int) -> str:
    """The saga reversal of ``charge``: if the run fails or is cancelled after charging, the
    charge is refunded, by the forward step's idempotency key, so even a charge whose
    response was lost (the outcome unknown to the run) is found and refunded once."""
    ctx = wayline.step_context()
    assert ctx.forward_idempotency_key is not None
    refunded = FakePaymentProvider().refund(ctx.forward_idempotency_key)
    return f"refunded the charge for {order.order_id}" if refunded else "nothing to refund"


@wayline.step(name="orders.charge", max_retries=3, retry_delay="200ms", compensate=refund_charge)
def charge(order: Order, amount_cents: int) -> Charge:
    key = wayline.step_context().idempotency_key
    provider = FakePaymentProvider(lose_first_response=True)
    return provider.charge(
        idempotency_key=key,
        customer=order.customer,
        amount_cents=amount_cents,
        currency=order.currency,
    )


@wayline.step(name="orders.refund")
def refund(charged: Charge, reason: str) -> str:
    FakePaymentProvider().refund(charged.idempotency_key)
    return f"refunded {charged.charge_id}: {reason}"


@wayline.step(name="orders.ship")
def ship(order: Order) -> Shipment:
    ctx = wayline.step_context()
    return Shipment(tracking_number=f"TRK-{order.order_id}-{ctx.attempt}", carrier="demo-post")


@wayline.workflow
async def orders(order: Order) -> Summary:
    amount = await validate(order)
    charged = await charge(order, amount)
    approval_hook = wayline.create_hook(f"approve:{order.order_id}", timeout="1h", type=Approval)
    summary = Summary(
        order_id=order.order_id, status="", charge_id=charged.charge_id, amount_cents=amount
    )
    try:
        approval: Approval = await approval_hook
    except wayline.HookTimeout:
        await refund(charged, "not approved within an hour")
        return summary.model_copy(update={"status": "expired"})
    if not approval.approved:
        await refund(charged, f"rejected by {approval.by}")
        return summary.model_copy(update={"status": "rejected", "approved_by": approval.by})
    await wayline.sleep("1s")  # the warehouse picks the order
    shipment = await ship(order)
    return summary.model_copy(
        update={
            "status": "shipped",
            "approved_by": approval.by,
            "tracking_number": shipment.tracking_number,
        }
    )


# --- the demo -------------------------------------------------------------------------------
async def _resume_like_a_user(token: str, payload: dict[str, object], world_url: str) -> None:
    """Resume the hook from another process with the CLI, as a person would."""
    command = ["wayline", "hooks", "resume", token, "--payload", json.dumps(payload)]
    command += ["--world", world_url]
    print(f"\n$ {shlex.join(command)}", flush=True)
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "wayline.cli",
        *command[1:],
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    out, _ = await proc.communicate()
    print(out.decode().rstrip() + "\n", flush=True)
    if proc.returncode != 0:
        raise SystemExit(f"resuming the hook failed (exit {proc.returncode})")


async def demo() -> int:
    from wayline.cli.commands import follow
    from wayline.cli.timeline import LiveProgress

    folder = Path(".wayline") / "demo"
    shutil.rmtree(folder, ignore_errors=True)  # a fresh world on every demo run
    folder.mkdir(parents=True)
    url = f"sqlite:///{(folder / 'wayline.db').resolve()}"
    os.environ["WAYLINE_WORLD"] = url  # the steps' payment provider keeps its file beside it
    order = Order(
        order_id="o-1001",
        customer="ada@example.com",
        items=[
            Item(sku="BOOK-42", quantity=2, unit_price_cents=1250),
            Item(sku="MUG-7", quantity=1, unit_price_cents=899),
        ],
    )
    token = f"approve:{order.order_id}"
    print(f"Wayline demo: order {order.order_id} on {url}\n", flush=True)
    started = time.monotonic()
    async with wayline.LocalWorld(folder / "wayline.db", poll_interval=0.01) as world:
        client = wayline.Client(world, [orders])
        async with wayline.Worker(world, [orders]):
            handle = await client.start(orders, order)
            progress = LiveProgress(sys.stdout, url)
            watcher = asyncio.create_task(follow(world, handle.run_id, progress, poll=0.02))
            for _ in range(1000):  # wait until the workflow asks for approval
                hook = await world.get_hook(token)
                if (hook is not None and hook.active) or watcher.done():
                    break
                await asyncio.sleep(0.02)
            await asyncio.sleep(0.3)  # let the reader see the run waiting
            await _resume_like_a_user(token, {"approved": True, "by": "grace"}, url)
            await asyncio.wait_for(watcher, timeout=30)
            result: Summary = await handle.result(timeout=30)
    print("\nresult:")
    print(json.dumps(result.model_dump(), indent=2))
    ledger = FakePaymentProvider().charges(order.customer)
    for made, requests in ledger:
        print(
            f"\npayment provider: {len(ledger)} charge for {order.customer}: {made.charge_id} "
            f"({made.amount_cents / 100:.2f} {made.currency}), asked for {requests} times "
            "under one idempotency key"
        )
    print(
        f"\ndone in {time.monotonic() - started:.1f}s. Look at the run again with:\n"
        f"  wayline runs show {handle.run_id} --world {url}"
    )
    return 0 if result.status == "shipped" and len(ledger) == 1 else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(demo()))
