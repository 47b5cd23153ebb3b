"""The reconciler applies the dispatch decision table (seed 000) to a live run: for every
created, non-terminal step it calls the same pure :func:`wayline.history.decide` the workers
use, with the operator's own identity as "my message" (so it never executes anything): an
owned step under an active lease gets its epoch-keyed backstop ensured; a lapsed, expired or
kill-switched step gets its step message ensured (idempotency key = the step's). Both are
idempotent enqueues: a wake already stored under the key makes them no-ops."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from wayline.history import Action, Event, StepState, decide, fold, lease_remaining
from wayline.settings import Settings
from wayline.world import FLOW_TOPIC, STEP_TOPIC, World

from .notices import NORMAL, Notice

OPERATOR_IDENTITY = "wayline-operator"
"""The operator's "my message" id: no delivery ever has it, so no step is executed here."""


def live_steps(events: Sequence[Event]) -> dict[str, dict[str, Any]]:
    """Each created, non-terminal step: ``{name, attempt, state: StepState}`` by its id, read
    from the one fold of the log."""
    view = fold(events[0].run_id if events else "", events)
    return {
        cid: {
            "name": step.name,
            "attempt": step.attempts[-1].number if step.attempts else 0,
            "state": StepState(
                owner_message_id=step.owner,
                last_started_at=step.last_started_at,
                saw_retrying=step.saw_retrying,
                owner_lease=step.owner_lease,  # a reader waits for the longer lease
            ),
        }
        for cid, step in view.steps.items()
        if not step.terminal
    }


async def apply_table(
    world: World, run_id: str, events: Sequence[Event], *, now: float, settings: Settings
) -> tuple[list[dict[str, Any]], list[tuple[str, Notice]]]:
    """Ensure each live step's wake; returns ``status.steps.live`` and the Events to post,
    each with the wake's key (post each key once)."""
    rows: list[dict[str, Any]] = []
    said: list[tuple[str, Notice]] = []
    for cid, step in live_steps(events).items():
        state: StepState = step["state"]
        d = decide(
            state,
            run_id=run_id,
            correlation_id=cid,
            my_message_id=OPERATOR_IDENTITY,
            now=now,
            lease=settings.lease_seconds,
            ownership_enabled=settings.inline_ownership,
        )
        if d.action is Action.ARM_BACKSTOP:
            wake = {"runId": run_id, "reason": "backstop", "backstopKey": d.idempotency_key}
            await world.enqueue(
                FLOW_TOPIC, wake, idempotency_key=d.idempotency_key, delay_seconds=d.delay_seconds
            )
            said.append(
                (
                    d.idempotency_key,
                    Notice(
                        NORMAL,
                        "BackstopArmed",
                        f"step {step['name']} is owned by {state.owner_message_id}: a wake "
                        f"is armed for when its lease ends (in {d.delay_seconds:.0f}s)",
                    ),
                )
            )
        elif d.action is Action.ENQUEUE:
            payload = {"runId": run_id, "stepId": cid, "stepName": step["name"]}
            await world.enqueue(STEP_TOPIC, payload, idempotency_key=d.idempotency_key)
            if state.owner_message_id is not None:
                said.append(
                    (
                        f"{d.idempotency_key}:{state.last_started_at!r}",
                        Notice(
                            NORMAL,
                            "StepRequeued",
                            f"step {step['name']}: the lease of {state.owner_message_id} "
                            "lapsed; its step message is ensured",
                        ),
                    )
                )
        rows.append(
            {
                "name": step["name"],
                "stepId": cid,
                "attempt": step["attempt"],
                "owner": state.owner_message_id,
                "leaseRemainingSeconds": round(
                    lease_remaining(state, now, settings.lease_seconds)
                    if state.owner_message_id and not state.saw_retrying
                    else 0.0,
                    1,
                ),
                "backstopArmed": d.action is Action.ARM_BACKSTOP,
                "action": str(d.action),
            }
        )
    return rows, said
