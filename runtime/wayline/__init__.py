"""Wayline: durable, code-first Python workflows.

Inside a workflow: await steps, ``sleep``, hooks, ``gather``/``race``; use ``now``/``random``/
``uuid4`` for determinism. Inside a step: ``step_context()``. Around them: ``Client``,
``Worker`` and a world (``LocalWorld``, ``open_world``).
"""

from .client import Client, RunHandle
from .context import StepContext, step_context
from .definitions import step, workflow
from .errors import (
    ConfigurationError,
    CorruptEntryError,
    CorruptLogError,
    FatalError,
    HookNotFoundError,
    HookTimeout,
    NotInStepError,
    NotInWorkflowError,
    PayloadTooLargeError,
    ReplayDivergenceError,
    RetryableError,
    RunCancelledError,
    RunFailedError,
    SerializationError,
    WaylineError,
    WorkflowNotFoundError,
    WorldUnavailableError,
)
from .events import RunStatus
from .open_world import open_world
from .replay import ChildFailedError, ChildTimeoutError, Hook, StepFailedError
from .settings import Settings
from .worker import Worker
from .workflow_api import child, create_hook, gather, now, race, random, sleep, uuid4
from .world import World
from .worlds.local import LocalWorld

__all__ = [
    "ChildFailedError",
    "ChildTimeoutError",
    "Client",
    "ConfigurationError",
    "CorruptEntryError",
    "CorruptLogError",
    "FatalError",
    "Hook",
    "HookNotFoundError",
    "HookTimeout",
    "LocalWorld",
    "NotInStepError",
    "NotInWorkflowError",
    "PayloadTooLargeError",
    "ReplayDivergenceError",
    "RetryableError",
    "RunCancelledError",
    "RunFailedError",
    "RunHandle",
    "RunStatus",
    "SerializationError",
    "Settings",
    "StepContext",
    "StepFailedError",
    "WaylineError",
    "Worker",
    "WorkflowNotFoundError",
    "World",
    "WorldUnavailableError",
    "child",
    "create_hook",
    "gather",
    "now",
    "open_world",
    "race",
    "random",
    "sleep",
    "step",
    "step_context",
    "uuid4",
    "workflow",
]


def __getattr__(name: str) -> object:
    if name == "NatsWorld":
        from .worlds.nats import NatsWorld

        return NatsWorld
    raise AttributeError(f"module 'wayline' has no attribute {name!r}")
