"""Retry policies: exponential backoff with a cap and jitter, and errors that are never retried.

    python examples/retry_policy.py

The schedule of each retry comes from the log (the step's idempotency key and the attempt
number), so it is the same on every worker and every replay; ``wayline runs show RUN_ID``
prints it ("retried 2.00 s later; attempt 2 of 5, backoff x2.0, max 1m 00s, jitter 0.1").
``RetryableError(retry_after=...)`` raised by the body still decides the next delay alone.
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

import wayline

CALLS: dict[str, int] = {}


class OutOfStock(Exception):
    """Retrying will not help: fail the step at once."""


@wayline.step(
    name="examples.reserve",
    retry=wayline.RetryPolicy(
        max_attempts=5,
        initial="50ms",  # 1s or more in real code; short so the example ends at once
        backoff=2.0,
        max_interval="1m",
        jitter=0.1,
        non_retryable=(OutOfStock,),
    ),
)
async def reserve(sku: str) -> str:
    CALLS[sku] = CALLS.get(sku, 0) + 1
    if sku == "GONE":
        raise OutOfStock(sku)
    if CALLS[sku] < 3:  # a flaky warehouse API: fails twice, then answers
        raise ConnectionError("warehouse timed out")
    return f"reserved {sku} on attempt {wayline.step_context().attempt}"


@wayline.workflow(name="examples.reservation")
async def reservation(sku: str) -> str:
    try:
        done: str = await reserve(sku)
    except wayline.StepFailedError as err:
        # one sentence: the step, what it raised, which attempt and why it was the last
        return f"not reserved: {err}"
    return done


async def main() -> list[str]:
    with tempfile.TemporaryDirectory() as tmp:
        world = wayline.LocalWorld(Path(tmp) / "wayline.db")
        async with world, wayline.Worker(world, [reservation]):
            client = wayline.Client(world)
            ok = await client.start(reservation, "BOOK-42")
            gone = await client.start(reservation, "GONE")
            return [await ok.result(timeout=30), await gone.result(timeout=30)]


if __name__ == "__main__":
    for line in asyncio.run(main()):
        print(line)
