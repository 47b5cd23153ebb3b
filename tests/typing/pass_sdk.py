"""Must pass ``mypy --strict``: the decorators keep the declared types all the way to the user."""

from __future__ import annotations

from typing import Any, assert_type

import wayline
from wayline import Client, RunHandle
from wayline._core.definitions import StepDefinition, WorkflowDefinition


class Receipt:
    def __init__(self, amount: int) -> None:
        self.amount = amount


@wayline.step
async def charge(order_id: str, amount: int) -> Receipt:
    return Receipt(amount)


@wayline.step(max_retries=5, retry_delay="2s")
def reserve(sku: str, *, quantity: int = 1) -> list[str]:
    return [sku] * quantity


@wayline.step(retry=wayline.RetryPolicy(max_attempts=5, initial="1s", non_retryable=(ValueError,)))
async def refund(order_id: str) -> bool:
    return True


def unbook(flight: str) -> None:
    pass


@wayline.step(
    compensate=unbook,
    compensate_retry=wayline.RetryPolicy(max_attempts=10, initial="5s"),
    max_retries=1,
)
def book(flight: str) -> str:
    return flight


@wayline.step(compensate=refund, max_retries=0)
def charge_once(order_id: str) -> str:
    return order_id


@wayline.workflow
async def kid(n: int) -> int:
    return n + 1


@wayline.workflow(concurrency=wayline.Limit(key=lambda order_id: order_id, max=1))
async def one_at_a_time(order_id: str) -> bool:
    assert_type(await refund(order_id), bool)
    assert_type(wayline.workflow_info().run_id, str)
    return True


@wayline.step(rate_limit=wayline.RateLimit(key=lambda user, text: user, rate="10/s", burst=5))
async def notify(user: str, text: str) -> int:
    return len(text)


@wayline.step(compensate=unbook, rate_limit=wayline.RateLimit(rate="1000/h"))
def book_slowly(flight: str) -> str:
    return flight


@wayline.workflow(rate_limit=wayline.RateLimit(rate="30/min", key="imports"))
async def paced_import(user: str) -> int:
    assert_type(await notify(user, "done"), int)
    assert_type(await book_slowly("LH1"), str)
    return 1


@wayline.workflow(name="orders", revision=2)
async def order(order_id: str, amount: int) -> str:
    receipt = await charge(order_id, amount)
    assert_type(receipt, Receipt)
    skus = await reserve("BOOK", quantity=2)
    assert_type(skus, list[str])
    assert_type(await wayline.child(kid, 1), int)
    assert_type(await wayline.child_with(wayline.ChildOptions(timeout="5m"), kid, 2), int)
    await wayline.sleep("1s")
    return f"{receipt.amount}:{len(skus)}"


async def start(client: Client) -> None:
    handle = await client.start(order, "o-1", 1250)
    assert_type(handle, RunHandle[str])
    assert_type(await handle.result(), str)
    pinned = await client.start_with(wayline.StartOptions(run_id="wf_" + "0" * 32), order, "o-1", 1250)
    assert_type(await pinned.result(timeout=1.0), str)
    by_id = await client.start_with(
        wayline.StartOptions(id="o-1", id_reuse="allow_duplicate"), order, "o-1", 1250
    )
    assert_type(await by_id.result(), str)
    assert_type(await client.resolve("o-1"), str)
    by_name = await client.start("orders", "o-1", 1250)
    assert_type(await by_name.result(), Any)
    assert_type(await client.handle("wf_" + "1" * 32).result(), Any)


def declared_types() -> None:
    declared: StepDefinition[[str, int], Receipt] = charge
    flow: WorkflowDefinition[[str, int], str] = order
    limited: WorkflowDefinition[[str], bool] = one_at_a_time
    retried: StepDefinition[[str], bool] = refund
    print(limited, retried)
    print(declared, flow)
