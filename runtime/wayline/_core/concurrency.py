"""``wayline.Limit``: how many runs of a workflow, or bodies of a step, may run at once, per key
(DBOS queues' ``concurrency``, Hatchet's concurrency keys, Temporal task-queue limits).

    @wayline.workflow(concurrency=wayline.Limit(key=lambda order: order.customer, max=1))
    async def fulfil(order: Order) -> None: ...

    @wayline.step(concurrency=wayline.Limit(key=lambda region, job: region, max=2))
    async def render(region: str, job: str) -> str: ...

The slots are a counted semaphore in the world (a table on SQLite, a KV entry per key on
NATS, updated by compare-and-set), so a limit holds across every worker on the world.

On a workflow, a run takes a slot of its key before its first event of work (``run_started``)
and holds it until it ends. A holder is a run, not a process: when the worker driving it dies
the run goes on elsewhere and keeps its slot; the slot is free again once the log says the run
ended (or the run is deleted). A run that finds no free slot is ``blocked`` with ``waitingFor:
concurrency`` in its status, and tries again with a growing pause (up to 5 s).

On a step, the key function takes the step's arguments (no key: one pool of ``max`` slots for
every call of the step, across all runs). The step never runs inline: its queued delivery
takes a slot before the body's attempt starts and gives it back when the body settles. The
holder is the step of its run, under a lease (``lease``, 30 s by default) that its worker
renews while the body runs, so a worker killed mid-body holds the slot at most ``lease``
seconds more, and a worker that cannot renew cuts its body off (a fenced attempt, retried)
before its lease runs out. A step that finds no free slot starts no attempt (no retry is
spent) and hands its delivery back for later (no delivery is counted); its run shows
``blocked`` with ``waitingFor: concurrency`` naming the step until a slot is free.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..durations import Duration, to_seconds
from ..errors import ConfigurationError
from . import limit_keys

DEFAULT_STEP_LEASE = 30.0
"""Seconds a step's slot outlives a holder that stopped renewing it (renewed every third)."""


@dataclass(frozen=True, slots=True)
class Limit:
    max: int = 1
    """Runs (or step bodies) with the same key that may be live at once."""
    key: Callable[..., Any] | str | None = None
    """A function of the workflow's (or step's) arguments giving the key (``lambda order:
    order.customer``), a constant string, or None: one key for the whole workflow or step."""
    lease: Duration | None = None
    """Steps only: how long a holder's slot lasts without a renewal (30 s by default). A
    workflow's slot is held by its run until the run ends, so it takes none."""

    def __post_init__(self) -> None:
        if not isinstance(self.max, int) or isinstance(self.max, bool) or self.max < 1:
            raise ConfigurationError(f"Limit.max must be an int >= 1, not {self.max!r}")
        if self.key is not None and not isinstance(self.key, str) and not callable(self.key):
            raise ConfigurationError(f"Limit.key takes a function or a string, not {self.key!r}")
        if self.lease is not None:
            try:
                seconds = to_seconds(self.lease)
            except ValueError as err:
                raise ConfigurationError(f"Limit.lease: {err}") from None
            if seconds <= 0:
                raise ConfigurationError(f"Limit.lease must be > 0, not {self.lease!r}")

    @property
    def lease_seconds(self) -> float:
        return DEFAULT_STEP_LEASE if self.lease is None else to_seconds(self.lease)

    def key_for(self, name: str, args: list[Any], kwargs: dict[str, Any]) -> str:
        """The slot key for a call of the workflow or step ``name`` with these arguments."""
        return limit_keys.key_for(self.key, name, args, kwargs)
