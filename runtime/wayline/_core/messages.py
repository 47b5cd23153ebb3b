"""What travels on the queue, built in one place: one frozen dataclass per message kind, each
with ``to_wire()``, and the reason a run is woken as an enum, so that a new reason is a type
error rather than a typo in one of the twenty places that send one.

The decoder (``_engine.messages``) reads these back. It keeps accepting a reason it does not
know (a newer release's, during a rolling upgrade): a reason only says why a run is replayed,
and a replay reads the log whatever the message says.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any


class WakeReason(StrEnum):
    """Why a flow message wakes a run (``reason`` on the wire; shown in logs and traces)."""

    START = "start"
    """The run was created: its first replay."""
    STEP = "step"
    """A queued step body ended: the run goes on from its outcome."""
    CHILD = "child"
    """A child run ended, or a child's start was refused: the parent goes on."""
    HOOK = "hook"
    """A hook was resumed (or a payload sent before the wait was found)."""
    WAIT = "wait"
    """A sleep or a wait's timeout came due (``WaitDue``)."""
    BACKSTOP = "backstop"
    """A step's lease ran out with no outcome in the log (``Backstop``)."""
    RECOVER = "recover"
    """``wayline recover`` or a starting worker re-armed a run with no wake coming."""
    REARM = "rearm"
    """A worker found a live run whose start message was lost (``_engine.lost_starts``)."""
    REPAIR = "repair"
    """A run's log was repaired: it is replayed from the log as it now reads."""
    WAKE_UP = "wake_up"
    """``Client.wake_up`` fired the run's sleeps now."""
    UNPAUSE = "unpause"
    """A paused run may go on."""
    CANCEL = "cancel"
    """A cancel was asked: the run unwinds."""
    MALFORMED = "malformed"
    """A message that did not read was set aside: its run is replayed from the log."""
    CONCURRENCY = "concurrency"
    """The run waits for a concurrency slot and tries again (``ConcurrencyRetry``)."""
    UNWIND_BLOCKED = "unwind-blocked"
    """The unwind waits for a step it cannot cut off: it looks again later."""
    HANDOFF = "handoff"
    """A closing worker handed the run on to another."""
    ROUTE = "route"
    """The run moved to the route of the definition it is pinned to."""
    COMPENSATION_RESUMED = "run_compensation_resumed"
    """Someone asked a stuck unwind to try its compensation again."""
    COMPENSATION_ABANDONED = "run_compensation_abandoned"
    """Someone gave a stuck unwind up: the run ends."""


@dataclass(frozen=True, slots=True)
class Wake:
    """A flow message: replay the run. ``log_mark``: where the sender's own view of the log
    ended right after its append (``World.log_mark``), when it holds one."""

    run_id: str
    reason: WakeReason
    log_mark: str | None = None

    def to_wire(self) -> dict[str, Any]:
        wire: dict[str, Any] = {"runId": self.run_id, "reason": str(self.reason)}
        if self.log_mark is not None:
            wire["logMark"] = self.log_mark
        return wire


@dataclass(frozen=True, slots=True)
class Backstop:
    """A flow message due when a step's lease runs out: ``key`` names the lease it checks."""

    run_id: str
    key: str

    def to_wire(self) -> dict[str, Any]:
        return {"runId": self.run_id, "reason": str(WakeReason.BACKSTOP), "backstopKey": self.key}


@dataclass(frozen=True, slots=True)
class WaitDue:
    """A flow message due when a sleep or a wait's timeout comes: ``wait_id`` names it."""

    run_id: str
    wait_id: str

    def to_wire(self) -> dict[str, Any]:
        return {"runId": self.run_id, "reason": str(WakeReason.WAIT), "waitId": self.wait_id}


@dataclass(frozen=True, slots=True)
class ConcurrencyRetry:
    """A flow message of a run that waits for a slot: ``tries`` counts its turns (its pause
    grows with them)."""

    run_id: str
    tries: int

    def to_wire(self) -> dict[str, Any]:
        return {"runId": self.run_id, "reason": str(WakeReason.CONCURRENCY), "tries": self.tries}


@dataclass(frozen=True, slots=True)
class StepStart:
    """A step message: run the queued body of step ``step_id`` (named ``step_name``)."""

    run_id: str
    step_id: str
    step_name: str

    def to_wire(self) -> dict[str, Any]:
        return {"runId": self.run_id, "stepId": self.step_id, "stepName": self.step_name}
