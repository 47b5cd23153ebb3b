"""The world seam: the one contract the runtime talks to for durability (``seam``), and
``open_world(url)`` (``open``). Concrete worlds live in ``wayline.worlds``. A world folds its
run views with ``fold_run``, the run part of the one projection (``_core.projections``)."""

from .._core.dispatch import FLOW_TOPIC, STEP_TOPIC
from .._core.projections import RunInfo, fold_run, new_run, pinned_definition, run_changes
from .checkup import Finding
from .open import open_world
from .seam import (
    Delivery,
    HookInfo,
    QueueDepth,
    RunWatch,
    World,
    flow_message,
    terminal_statuses,
)

__all__ = [
    "FLOW_TOPIC",
    "STEP_TOPIC",
    "Delivery",
    "Finding",
    "HookInfo",
    "QueueDepth",
    "RunInfo",
    "RunWatch",
    "World",
    "flow_message",
    "fold_run",
    "new_run",
    "open_world",
    "pinned_definition",
    "run_changes",
    "terminal_statuses",
]
