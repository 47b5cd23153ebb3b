"""``wayline.Limit``: how many runs of a workflow may run at once, per key (DBOS queues'
``concurrency``, Hatchet's concurrency keys, Temporal task-queue limits).

    @wayline.workflow(concurrency=wayline.Limit(key=lambda order: order.customer, max=1))
    async def fulfil(order: Order) -> None: ...

A run takes a slot of its key before its first event of work (``run_started``) and holds it
until it ends. The slots are a counted semaphore in the world (a table on SQLite, a KV entry
per key on NATS, updated by compare-and-set), so the limit holds across every worker on the
world. A holder is a run, not a process: when the worker driving it dies the run goes on
elsewhere and keeps its slot; the slot is free again once the log says the run ended (or the
run is deleted). A run that finds no free slot is ``blocked`` with ``waitingFor:
concurrency`` in its status, and tries again with a growing pause (up to 5 s).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..errors import ConfigurationError


@dataclass(frozen=True, slots=True)
class Limit:
    max: int = 1
    """Runs with the same key that may be live (started, not ended) at once."""
    key: Callable[..., Any] | str | None = None
    """A function of the workflow's arguments giving the key (``lambda order:
    order.customer``), a constant string, or None: one key for the whole workflow."""

    def __post_init__(self) -> None:
        if not isinstance(self.max, int) or isinstance(self.max, bool) or self.max < 1:
            raise ConfigurationError(f"Limit.max must be an int >= 1, not {self.max!r}")
        if self.key is not None and not isinstance(self.key, str) and not callable(self.key):
            raise ConfigurationError(f"Limit.key takes a function or a string, not {self.key!r}")

    def key_for(self, workflow_name: str, args: list[Any], kwargs: dict[str, Any]) -> str:
        if self.key is None:
            part = "*"
        elif isinstance(self.key, str):
            part = self.key
        else:
            part = str(self.key(*args, **kwargs))
        return f"{workflow_name}:{part}"
