"""What travels on the queue, as read back, and what a handler tells the worker to do with a
delivery. Messages are built by their typed constructors (``_core.messages``)."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import Any

import pydantic

from ..errors import (
    WaylineError,
)
from ..world import Delivery
from .inflight import InFlight

log = logging.getLogger("wayline.runtime")


class FlowMessage(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="allow")
    runId: str = pydantic.Field(min_length=1)
    # Text, not a ``WakeReason``: a reason from a newer release (a rolling upgrade) still
    # wakes the run, which reads its log whatever the reason says.
    reason: str | None = None
    backstopKey: str | None = None


class StepMessage(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="allow")
    runId: str = pydantic.Field(min_length=1)
    stepId: str = pydantic.Field(min_length=1)
    stepName: str = pydantic.Field(min_length=1)


@dataclass(frozen=True, slots=True)
class Verdict:
    """What the worker does with the delivery once the handler returns."""

    kind: str  # "ack" | "retry" | "dead" | "none" (the handler already settled it)
    delay: float = 0.0
    reason: str = ""


ACK = Verdict("ack")

UNSEEN_TRIES = 3
"""Deliveries of a message whose run (or step) its read does not show, before it is set
aside. Every message is written after what it names, but a replicated NATS world's reads are
direct gets, which any replica may answer, also one that has not applied that write yet
(JetStream promises no read-after-write there): the next delivery reads again."""


def unseen(delivery: Delivery, reason: str) -> Verdict:
    """Read again a little later (``UNSEEN_TRIES`` deliveries in all), then set aside."""
    if delivery.attempt < UNSEEN_TRIES:
        delay = 0.5 * delivery.attempt
        log.info("%s: reading it again in %.1fs (the read may not show it yet)", reason, delay)
        return Verdict("retry", delay=delay)
    return Verdict("dead", reason=reason)


@dataclass(slots=True)
class Stats:
    """What one delivery did, for its ``workflow.execute`` span."""

    owned_recovery_steps: int = 0
    backstop_wakes_armed: int = 0
    inline_steps: int = 0
    rebuilds: int = 0
    started: bool = False
    inflight_owned: set[str] = field(default_factory=set)
    bodies: InFlight = field(default_factory=InFlight)
    """Inline bodies still running under this delivery (see ``inflight``)."""
    held: bool = False
    """The run's pause holds a step this delivery owns: it is handed back, not acknowledged
    (``planning.holds_a_step``)."""
    withdrawals: set[asyncio.Task[Any]] = field(default_factory=set)
    """Withdrawals of woken waits' delayed messages still in flight (``prompt_wakes``): they
    go on beside the drive, and the delivery is settled only after them."""

    async def settled(self) -> None:
        """Wait for every body still running, then every withdrawal still in flight (each
        one request): the delivery is settled only after them."""
        await self.bodies.settle()
        if self.withdrawals:
            await asyncio.gather(*self.withdrawals, return_exceptions=True)


def malformed_verdict(delivery: Delivery, err: Exception) -> Verdict:
    raw = delivery.raw[:200].decode(errors="replace")
    detail = str(err).splitlines()[0] if isinstance(err, WaylineError) else _first_error(err)
    return Verdict("dead", reason=f"malformed {delivery.topic} payload ({detail}): {raw}")


def _first_error(err: Exception) -> str:
    if isinstance(err, pydantic.ValidationError):
        e = err.errors()[0]
        return f"{'.'.join(str(p) for p in e['loc']) or 'payload'}: {e['msg']}"
    return str(err)
