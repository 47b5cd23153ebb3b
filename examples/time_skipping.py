"""Time-skipping tests: a subscription that renews every 30 days, tested in milliseconds.

    python examples/time_skipping.py

``wayline.testing.Environment`` runs an embedded world and a worker in this process; when every
run is idle its clock jumps to the next timer, so ``wayline.sleep("30d")`` passes at once and
``wayline.now()`` inside the workflow sees the 30 days go by. ``Client.wake_up(run_id)``
(``wayline runs wake RUN_ID`` on any world) fires a pending sleep early instead, recorded in the
log as an early wake.
"""

from __future__ import annotations

import asyncio

import wayline
import wayline.testing


@wayline.step(name="examples.charge_month")
async def charge_month(customer: str, month: int) -> str:
    return f"charged {customer} for month {month}"


@wayline.workflow(name="examples.subscription")
async def subscription(customer: str, months: int) -> dict[str, object]:
    start = wayline.now()
    receipts = []
    for month in range(1, months + 1):
        receipts.append(await charge_month(customer, month))
        await wayline.sleep("30d")
    return {"receipts": receipts, "days": round((wayline.now() - start).total_seconds() / 86400)}


async def main() -> dict[str, object]:
    async with wayline.testing.Environment([subscription]) as env:
        handle = await env.client.start(subscription, "ana", 12)  # a year of renewals
        out: dict[str, object] = await handle.result(timeout=30)
        out["skippedDays"] = round(env.skipped / 86400)
        return out


if __name__ == "__main__":
    print(asyncio.run(main()))
