"""Compensations with ``compensate_retry=`` (``test_compensation_retries``, and the SIGKILL
test in ``tests/faults``): each saga charges, then fails; its refund counts its attempts in
the log file and fails, so the count is the refund's policy."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import wayline
from tests.runtime.flows import mark
from tests.runtime.saga_flows import trip_confirm_fails


def _saga(
    name: str, refund: Callable[..., Any], policy: wayline.RetryPolicy, forward_retries: int
) -> Any:
    """A workflow ``name`` whose charge (``max_retries=forward_retries``) is refunded by
    ``refund`` under ``policy``."""

    @wayline.step(
        name=f"{name}.charge",
        compensate=refund,
        compensate_retry=policy,
        max_retries=forward_retries,
        retry_delay=0.05,
    )
    def charge(path: str, trip: str) -> str:
        mark(path, f"charge {trip}")
        return f"ch_{trip}"

    @wayline.workflow(name=name)
    async def saga(path: str, trip: str) -> str:
        await charge(path, trip)
        await trip_confirm_fails(path, trip)
        return "booked"

    return saga


def _refund_never(path: str, trip: str) -> None:
    mark(path, f"refund attempt {wayline.step_context().attempt}")
    raise RuntimeError("refund service down")


async def _refund_hangs_first(path: str, trip: str) -> None:
    """Its first attempt hangs until the worker running it is killed; later ones fail."""
    attempt = wayline.step_context().attempt
    mark(path, f"refund attempt {attempt}")
    if attempt == 1:
        await asyncio.sleep(60)
    raise RuntimeError("refund service down")


_QUICK = {"initial": 0.05, "backoff": 1.0}

refund_tried_once = _saga(
    "refund_tried_once", _refund_never, wayline.RetryPolicy(max_attempts=1), forward_retries=3
)
refund_tried_thrice = _saga(
    "refund_tried_thrice",
    _refund_never,
    wayline.RetryPolicy(max_attempts=3, **_QUICK),
    forward_retries=1,
)
refund_interrupted = _saga(
    "refund_interrupted",
    _refund_hangs_first,
    wayline.RetryPolicy(max_attempts=2, **_QUICK),
    forward_retries=3,
)
