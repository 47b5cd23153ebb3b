"""The events a workflow's hook calls turn into (creation data, disposals)."""

from __future__ import annotations

from typing import Any

from .._core.events import EventType, NewEvent
from .._core.replay import HookRecord, Replay


def hook_created_data(hook: HookRecord) -> dict[str, Any]:
    data: dict[str, Any] = {"token": hook.token}
    if hook.type_name is not None:
        data["type"] = hook.type_name
    if hook.shape is not None:
        data["shape"] = hook.shape
    if hook.metadata is not None:
        data["metadata"] = hook.metadata
    return data


def disposals(replay: Replay) -> list[NewEvent]:
    """Written alone, before the next batch: a world frees a token when its hook's disposal is
    stored, and a new hook in that batch may claim the same token."""
    return [NewEvent(EventType.HOOK_DISPOSED, h.cid) for h in replay.new_disposals.values()]
