"""A saga whose unwind a person gives up, and a compensation with retries of its own.

    python examples/trip_saga.py

The trip books a flight, charges a card and holds a seat, then the hotel has no room: the
run unwinds, latest first. The seat's release fails for good (``FatalError``), which parks
the run in ``compensation_stuck``; abandoning it ends the run failed and returns (and
records, and ``wayline runs show`` prints) the reversals it gives up untried: the card's
refund and the flight's cancellation. The refund, had it run, would have had 5 attempts of
its own (``compensate_retry=``), not the 2 of the charge's ``max_retries=1``.
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

import wayline


def cancel_flight(trip: str) -> None:
    print(f"flight of {trip} cancelled")


@wayline.step(name="examples.book_flight", compensate=cancel_flight)
def book_flight(trip: str) -> str:
    return f"FL-{trip}"


def refund_card(trip: str) -> None:
    print(f"card of {trip} refunded")


@wayline.step(
    name="examples.charge_card",
    max_retries=1,  # a charge is tried twice at most: a double charge costs more than a retry
    compensate=refund_card,
    # a refund must go through: tried up to 5 times, whatever the charge allows itself
    compensate_retry=wayline.RetryPolicy(max_attempts=5, initial="50ms"),
)
def charge_card(trip: str) -> str:
    return f"CH-{trip}"


def release_seat(trip: str) -> None:
    raise wayline.FatalError("the seat desk is closed")


@wayline.step(name="examples.hold_seat", compensate=release_seat)
def hold_seat(trip: str) -> str:
    return f"SEAT-{trip}"


@wayline.step(name="examples.book_hotel", max_retries=0)
def book_hotel(trip: str) -> str:
    raise wayline.FatalError("no room left")


@wayline.workflow(name="examples.trip")
async def trip(trip: str) -> str:
    await book_flight(trip)
    await charge_card(trip)
    await hold_seat(trip)
    return await book_hotel(trip)


async def main() -> list[str]:
    with tempfile.TemporaryDirectory() as tmp:
        world = wayline.LocalWorld(Path(tmp) / "wayline.db")
        async with world, wayline.Worker(world, [trip]):
            client = wayline.Client(world)
            handle = await client.start(trip, "LIS-2027")
            for _ in range(600):  # a parked run does not end: look at it until it parks
                if await handle.status() is wayline.RunStatus.COMPENSATION_STUCK:
                    break
                await asyncio.sleep(0.05)
            not_run = (await client.abandon_compensation(handle.run_id)).not_run or ()
            try:
                await handle.result(timeout=30)
            except wayline.RunFailedError as err:
                return [*(str(r) for r in not_run), str(err)]
    raise AssertionError("the run was to fail")


if __name__ == "__main__":
    for line in asyncio.run(main()):
        print(line)
