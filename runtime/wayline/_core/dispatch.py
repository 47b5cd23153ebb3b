"""Inline step ownership and the dispatch decision table (seed 000). Pure functions only.

Ownership is derived from the step's events alone, so every replayer computes the same answer:
the latest ``step_started`` wins (stamped = owned, bare = unowned), and ``step_retrying`` lapses
ownership for that correlation id for good. The lease bounds how long a dead owner can delay
recovery; the backstop is a plain run continuation keyed by the ownership epoch.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum

FLOW_TOPIC = "flow"
"""Run continuations: ``{"runId": ...}``. Replays the run."""
STEP_TOPIC = "step"
"""Queued step bodies: ``{"runId": ..., "stepId": ..., "stepName": ...}``."""

MAX_LEASE_SECONDS = 900.0
"""Seed 000: the ceiling on an inline lease, so a single delayed backstop always suffices."""


@dataclass(frozen=True, slots=True)
class StepState:
    """What dispatch needs to know about one created, non-terminal step."""

    owner_message_id: str | None = None
    """``ownerMessageId`` of the latest ``step_started`` (None for a bare start or none)."""
    last_started_at: float | None = None
    """World-stamped time of the latest ``step_started``."""
    saw_retrying: bool = False
    terminal: bool = False
    owner_lease: float | None = None
    """The lease the owner ran under (``lease`` of its ``step_started``; None in older logs)."""


def ownership_active(state: StepState) -> bool:
    return state.owner_message_id is not None and not state.saw_retrying and not state.terminal


def lease_remaining(state: StepState, now: float, lease: float) -> float:
    """``min(lease, max(0, lastStartedAt + lease - now))``; 0 when the stamp is unusable.

    The upper clamp is for clock skew: ``lastStartedAt`` is world-stamped, ``now`` is local, and
    a local clock behind the world's must never yield more than one lease.

    The lease is the longer of the reader's and the owner's (recorded in its ``step_started``):
    an owner runs under its own settings (its bound plus its visibility below its lease, see
    ``worker.check_bounds``), so a reader of a version rolled out with a shorter lease must not
    take it for dead sooner; a recorded lease never shortens the reader's own either.
    """
    owned = state.owner_lease
    if owned is not None and math.isfinite(owned) and owned > lease:
        lease = owned
    lease = min(MAX_LEASE_SECONDS, max(0.0, lease))
    started = state.last_started_at
    if started is None or not math.isfinite(started) or started <= 0:
        return 0.0
    return min(lease, max(0.0, started + lease - now))


def step_dispatch_key(run_id: str, correlation_id: str) -> str:
    """The step message's idempotency key (the reference's bare ``correlationId``; ours are
    per-run slots, so the run id makes them unique in a shared queue)."""
    return f"{run_id}:{correlation_id}"


def backstop_key(run_id: str, correlation_id: str, last_started_at: float | None) -> str:
    """``{correlationId}:backstop:{lastStartedAt}``: scoped to the ownership epoch (seed 000,
    lesson 2), never the step message's key (lesson 1)."""
    return f"{step_dispatch_key(run_id, correlation_id)}:backstop:{last_started_at!r}"


class Action(StrEnum):
    EXECUTE_OWNED = "execute_owned"
    """Owned recovery: the arriving delivery owns the step; run its body here, re-stamped."""
    ARM_BACKSTOP = "arm_backstop"
    """Another live owner: ensure a delayed plain run continuation exists."""
    ENQUEUE = "enqueue"
    """Unowned, lapsed, expired or kill-switched: immediate step message keyed by the step."""


@dataclass(frozen=True, slots=True)
class Decision:
    action: Action
    idempotency_key: str
    delay_seconds: float = 0.0


def decide(
    state: StepState,
    *,
    run_id: str,
    correlation_id: str,
    my_message_id: str,
    now: float,
    lease: float,
    ownership_enabled: bool,
    arriving_backstop_key: str | None = None,
) -> Decision:
    """The decision table for a created, non-terminal step (seed 000, "The dispatch decision
    table"). Uncreated steps are planned by the handler (lazy inline or eager); terminal steps
    are never pending."""
    enqueue = Decision(Action.ENQUEUE, step_dispatch_key(run_id, correlation_id))
    if not ownership_enabled or not ownership_active(state):
        return enqueue
    remaining = lease_remaining(state, now, lease)
    if remaining <= 0:
        return enqueue
    if state.owner_message_id == my_message_id:
        return Decision(Action.EXECUTE_OWNED, step_dispatch_key(run_id, correlation_id))
    key = backstop_key(run_id, correlation_id, state.last_started_at)
    if arriving_backstop_key is not None and arriving_backstop_key.startswith(key):
        # This delivery *is* this epoch's backstop, firing a little before the world-stamped
        # expiry (local clock behind the world's). Its own key is still held while it is in
        # flight, so re-arming under it would be dropped and leave no wake at all: re-arm under
        # a successor key. One successor per firing keeps pending backstops bounded.
        key = f"{key}:after:{arriving_backstop_key.count(':after:') + 1}"
    return Decision(Action.ARM_BACKSTOP, key, delay_seconds=remaining)
