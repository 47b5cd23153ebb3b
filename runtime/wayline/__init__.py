"""Wayline: durable, code-first Python workflows.

Inside a workflow: await steps, ``sleep``, hooks, ``gather``/``race``; use ``now``/``random``/
``uuid4`` for determinism. Inside a step: ``step_context()``. Around them: ``Client``,
``Worker`` and a world (``LocalWorld``, ``open_world``).
"""

from ._core.events import RunStatus
from ._core.replay import Hook
from ._sdk.context import StepContext, step_context
from ._sdk.decorators import step, workflow
from ._sdk.workflow_api import (
    child,
    create_hook,
    gather,
    now,
    patched,
    race,
    random,
    sleep,
    uuid4,
)
from .client import Client, RunHandle
from .errors import (
    ChildFailedError,
    ChildTimeoutError,
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
    StepFailedError,
    WaylineError,
    WorkflowNotFoundError,
    WorldUnavailableError,
)
from .settings import Settings
from .worker import Worker
from .world import World, open_world
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
    "patched",
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
