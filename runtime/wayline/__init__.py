"""Wayline: durable, code-first Python workflows.

Inside a workflow: await steps, ``sleep``, hooks, ``gather``/``race``; use ``now``/``random``/
``uuid4`` for determinism. Inside a step: ``step_context()``. Around them: ``Client``,
``Worker`` and a world (``LocalWorld``, ``open_world``).
"""

from ._core.concurrency import Limit
from ._core.events import RunStatus
from ._core.retry import RetryPolicy
from ._sdk.combinators import any
from ._sdk.context import StepContext, step_context
from ._sdk.decorators import step, workflow
from ._sdk.hooks import Hook
from ._sdk.info import WorkflowInfo, workflow_info
from ._sdk.options import ChildOptions
from ._sdk.streams import StreamChunk, StreamClosedError, stream
from ._sdk.workflow_api import (
    child,
    child_with,
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
    AllFailedError,
    ChildFailedError,
    ChildTimeoutError,
    ConfigurationError,
    CorruptEntryError,
    CorruptLogError,
    FatalError,
    HookNotFoundError,
    HookTimeout,
    HookWaitTimeoutError,
    InvalidIdError,
    InvalidPayloadError,
    NotInStepError,
    NotInWorkflowError,
    PayloadTooLargeError,
    ReplayDivergenceError,
    ResultTimeoutError,
    RetryableError,
    RunAlreadyExistsError,
    RunCancelledError,
    RunFailedError,
    RunNotFoundError,
    RunTerminalError,
    SerializationError,
    StepFailedError,
    WaylineError,
    WorkflowNotFoundError,
    WorldStorageFullError,
    WorldUnavailableError,
    WrongNamespaceError,
)
from .settings import Settings
from .start_options import StartOptions
from .worker import Worker
from .world import HookInfo, World, open_world
from .world.business_ids import IdConflictPolicy, IdReusePolicy
from .worlds.local import LocalWorld

__all__ = [
    "AllFailedError",
    "ChildFailedError",
    "ChildOptions",
    "ChildTimeoutError",
    "Client",
    "ConfigurationError",
    "CorruptEntryError",
    "CorruptLogError",
    "FatalError",
    "Hook",
    "HookInfo",
    "HookNotFoundError",
    "HookTimeout",
    "HookWaitTimeoutError",
    "IdConflictPolicy",
    "IdReusePolicy",
    "InvalidIdError",
    "InvalidPayloadError",
    "Limit",
    "LocalWorld",
    "NotInStepError",
    "NotInWorkflowError",
    "PayloadTooLargeError",
    "ReplayDivergenceError",
    "ResultTimeoutError",
    "RetryPolicy",
    "RetryableError",
    "RunAlreadyExistsError",
    "RunCancelledError",
    "RunFailedError",
    "RunHandle",
    "RunNotFoundError",
    "RunStatus",
    "RunTerminalError",
    "SerializationError",
    "Settings",
    "StartOptions",
    "StepContext",
    "StepFailedError",
    "StreamChunk",
    "StreamClosedError",
    "WaylineError",
    "Worker",
    "WorkflowInfo",
    "WorkflowNotFoundError",
    "World",
    "WorldStorageFullError",
    "WorldUnavailableError",
    "WrongNamespaceError",
    "any",
    "child",
    "child_with",
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
    "stream",
    "uuid4",
    "workflow",
    "workflow_info",
]


def __getattr__(name: str) -> object:
    if name == "NatsWorld":
        from .worlds.nats import NatsWorld

        return NatsWorld
    raise AttributeError(f"module 'wayline' has no attribute {name!r}")
