"""Wayline: durable, code-first Python workflows.

Inside a workflow: await steps, ``sleep``, hooks, ``gather``/``race``; use ``now``/``random``/
``uuid4`` for determinism. Inside a step: ``step_context()``. Around them: ``Client``,
``Worker`` and a world (``LocalWorld``, ``open_world``).
"""

from typing import TYPE_CHECKING

from ._core.concurrency import Limit
from ._core.continuation import ContinueAsNewError
from ._core.debounce import Debounce
from ._core.definitions import StepDefinition, WorkflowDefinition
from ._core.events import RunStatus
from ._core.projections import Reversal
from ._core.rate_limits import RateLimit
from ._core.retry import RetryPolicy
from ._sdk.combinators import any
from ._sdk.context import StepContext, step_context
from ._sdk.decorators import step, workflow
from ._sdk.hooks import Hook, HookHandle
from ._sdk.info import WorkflowInfo, workflow_info
from ._sdk.options import ChildOptions
from ._sdk.streams import StreamChunk, StreamClosedError, stream
from ._sdk.workflow_api import (
    child,
    child_with,
    continue_as_new,
    continue_as_new_keeping_version,
    create_hook,
    gather,
    now,
    patched,
    race,
    random,
    set_attributes,
    sleep,
    uuid4,
)
from .client import Abandonment, Client, RunHandle
from .durations import Duration
from .errors import (
    AllFailedError,
    ChildFailedError,
    ChildTimeoutError,
    ConfigurationError,
    CorruptEntryError,
    CorruptLogError,
    ErrorCause,
    FatalError,
    ForkRefusedError,
    HookBufferOccupiedError,
    HookNotFoundError,
    HookTimeout,
    HookWaitTimeoutError,
    InvalidAttributesError,
    InvalidIdError,
    InvalidPayloadError,
    InvalidQueryError,
    NotInStepError,
    NotInWorkflowError,
    PayloadTooLargeError,
    RedriveRefusedError,
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
from .world import HookInfo, RunInfo, World, open_world
from .world.business_ids import IdConflictPolicy, IdReusePolicy
from .world.redriving import Redrive
from .worlds.local import LocalWorld

if TYPE_CHECKING:
    # What a type checker sees of the NATS world; at run time ``__getattr__`` below imports it
    # on first use, so that ``import wayline`` works without the ``nats`` extra installed.
    # For the same reason it is not in ``__all__``: ``from wayline import *`` would import it.
    from .worlds.nats import NatsWorld as NatsWorld

__all__ = [
    "Abandonment",
    "AllFailedError",
    "ChildFailedError",
    "ChildOptions",
    "ChildTimeoutError",
    "Client",
    "ConfigurationError",
    "ContinueAsNewError",
    "CorruptEntryError",
    "CorruptLogError",
    "Debounce",
    "Duration",
    "ErrorCause",
    "FatalError",
    "ForkRefusedError",
    "Hook",
    "HookBufferOccupiedError",
    "HookHandle",
    "HookInfo",
    "HookNotFoundError",
    "HookTimeout",
    "HookWaitTimeoutError",
    "IdConflictPolicy",
    "IdReusePolicy",
    "InvalidAttributesError",
    "InvalidIdError",
    "InvalidPayloadError",
    "InvalidQueryError",
    "Limit",
    "LocalWorld",
    "NotInStepError",
    "NotInWorkflowError",
    "PayloadTooLargeError",
    "RateLimit",
    "Redrive",
    "RedriveRefusedError",
    "ReplayDivergenceError",
    "ResultTimeoutError",
    "RetryPolicy",
    "RetryableError",
    "Reversal",
    "RunAlreadyExistsError",
    "RunCancelledError",
    "RunFailedError",
    "RunHandle",
    "RunInfo",
    "RunNotFoundError",
    "RunStatus",
    "RunTerminalError",
    "SerializationError",
    "Settings",
    "StartOptions",
    "StepContext",
    "StepDefinition",
    "StepFailedError",
    "StreamChunk",
    "StreamClosedError",
    "WaylineError",
    "Worker",
    "WorkflowDefinition",
    "WorkflowInfo",
    "WorkflowNotFoundError",
    "World",
    "WorldStorageFullError",
    "WorldUnavailableError",
    "WrongNamespaceError",
    "any",
    "child",
    "child_with",
    "continue_as_new",
    "continue_as_new_keeping_version",
    "create_hook",
    "gather",
    "now",
    "open_world",
    "patched",
    "race",
    "random",
    "set_attributes",
    "sleep",
    "step",
    "step_context",
    "stream",
    "uuid4",
    "workflow",
    "workflow_info",
]


if not TYPE_CHECKING:
    # Hidden from type checkers: a module ``__getattr__`` would make every misspelt name
    # (``wayline.slep``) an attribute of type ``object`` instead of an error.
    def __getattr__(name: str) -> object:
        if name == "NatsWorld":
            from .worlds.nats import NatsWorld

            return NatsWorld
        raise AttributeError(f"module 'wayline' has no attribute {name!r}")
