"""Concurrency limits: at most one fulfilment per customer at a time, across every worker.

    python examples/concurrency_limit.py

``@wayline.workflow(concurrency=wayline.Limit(key=lambda order: order.customer, max=1))``:
a run takes a slot of its key in the world before it starts and holds it until it ends. A
second order of the same customer waits, visibly: ``wayline runs show`` says ``blocked``
with "waiting for a concurrency slot of 'fulfil:ana'", and its status has
``waitingFor: concurrency``. Another customer's order is not held up.
"""

from __future__ import annotations

import asyncio
import tempfile
from dataclasses import dataclass
from pathlib import Path

import wayline

LOG: list[str] = []


@dataclass
class Order:
    order_id: str
    customer: str


@wayline.step(name="examples.pack")
async def pack(order: Order) -> None:
    LOG.append(f"pack {order.order_id}")
    await asyncio.sleep(0.05)  # the warehouse takes a while
    LOG.append(f"packed {order.order_id}")


@wayline.workflow(name="fulfil", concurrency=wayline.Limit(key=lambda order: order.customer, max=1))
async def fulfil(order: Order) -> str:
    await pack(order)
    return order.order_id


async def main() -> list[str]:
    with tempfile.TemporaryDirectory() as tmp:
        world = wayline.LocalWorld(Path(tmp) / "wayline.db")
        other = wayline.LocalWorld(Path(tmp) / "wayline.db")  # a second worker, same world
        async with world, other, wayline.Worker(world, [fulfil]), wayline.Worker(other, [fulfil]):
            client = wayline.Client(world)
            handles = [
                await client.start(fulfil, Order(f"o{i}", "ana" if i < 3 else "bo"))
                for i in range(4)
            ]
            for handle in handles:
                await handle.result(timeout=30)
    return LOG


if __name__ == "__main__":
    for line in asyncio.run(main()):
        print(line)
