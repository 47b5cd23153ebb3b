"""``wayline.workflow_info()``: what a workflow may know about its own run (Temporal's
``workflow.info()``, the reference runtime's ``getWorkflowMetadata``)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from .context import current_replay


@dataclass(frozen=True, slots=True)
class WorkflowInfo:
    run_id: str
    workflow_name: str
    """The name the run was started under (``@wayline.workflow(name=...)``)."""
    revision: int
    definition_identity: str
    """SHA-256 of the definition's shape driving this run (``wayline.identity``)."""
    started_at: datetime
    """World time of ``run_started``: the same on every replay."""
    attempt: int
    """Which delivery of the current queue message this is (1 the first time). It is about
    *this* delivery, not the run, so it may differ between replays: read it for logs and
    metrics, never to decide what the workflow does next."""
    parent_run_id: str | None = None
    """The parent's run id when this run is a child."""


def workflow_info() -> WorkflowInfo:
    """The running workflow's run id, name, definition identity, start time and delivery
    attempt. Raises :class:`wayline.NotInWorkflowError` outside a workflow."""
    replay = current_replay("workflow_info")
    started = replay.started_at
    if started is None:  # run_started is still provisional: its stamp is not known yet
        started = replay.now  # raises NeedsStamp: the handler writes it and replays
    parent: Any = replay.parent
    return WorkflowInfo(
        run_id=replay.run_id,
        workflow_name=replay.workflow.name,
        revision=replay.workflow.revision,
        definition_identity=replay.workflow.identity,
        started_at=datetime.fromtimestamp(started, UTC),
        attempt=replay.delivery_attempt,
        parent_run_id=str(parent["runId"]) if isinstance(parent, dict) else None,
    )
