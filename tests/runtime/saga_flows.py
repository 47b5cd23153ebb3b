"""Sagas for the edges of an unwind: an abandon that leaves reversals untried, and
compensations retried by a policy of their own (``test_abandoned_unwinds``,
``test_compensation_retries``). Side effects are counted in files, as in ``flows``."""

from __future__ import annotations

from pathlib import Path

import wayline
from tests.runtime.flows import mark

SEAT_DESK_OFFLINE = "seat-desk-offline"


def trip_cancel_flight(path: str, trip: str) -> None:
    mark(path, f"cancel flight {trip}")


@wayline.step(compensate=trip_cancel_flight)
def trip_book_flight(path: str, trip: str) -> str:
    mark(path, f"book flight {trip}")
    return f"fl_{trip}"


def trip_refund_card(path: str, trip: str) -> None:
    mark(path, f"refund card {trip}")


@wayline.step(compensate=trip_refund_card)
def trip_charge_card(path: str, trip: str) -> str:
    mark(path, f"charge card {trip}")
    return f"ch_{trip}"


def trip_release_seat(path: str, trip: str) -> None:
    mark(path, f"try release seat {trip}")
    if (Path(path).parent / SEAT_DESK_OFFLINE).exists():
        raise wayline.FatalError("seat desk offline")


@wayline.step(compensate=trip_release_seat)
def trip_hold_seat(path: str, trip: str) -> str:
    mark(path, f"hold seat {trip}")
    return f"seat_{trip}"


@wayline.step(max_retries=0)
def trip_confirm_fails(path: str, trip: str) -> None:
    mark(path, f"confirm {trip}")
    raise wayline.FatalError("no hotel")


@wayline.workflow
async def trip(path: str, trip: str) -> str:
    """Books a flight, charges a card, holds a seat, then fails: the seat's release fails
    for good while ``SEAT_DESK_OFFLINE`` exists, and parks the unwind with the card's refund
    and the flight's cancellation still to run."""
    await trip_book_flight(path, trip)
    await trip_charge_card(path, trip)
    await trip_hold_seat(path, trip)
    await trip_confirm_fails(path, trip)
    return "booked"


@wayline.step(max_retries=0)
def trip_refund_once(path: str, trip: str) -> None:
    """A compensation that is a step of its own, declared with its own retries (none)."""
    mark(path, f"refund attempt {wayline.step_context().attempt}")
    raise RuntimeError("refund service down")


@wayline.step(compensate=trip_refund_once, max_retries=3, retry_delay=0.05)
def trip_charge_then_refund_once(path: str, trip: str) -> str:
    mark(path, f"charge {trip}")
    return f"ch_{trip}"


@wayline.workflow
async def trip_own_step_policy(path: str, trip: str) -> str:
    await trip_charge_then_refund_once(path, trip)
    await trip_confirm_fails(path, trip)
    return "booked"
