"""What the periodic looks (schedules, workers) say: their notices posted as Kubernetes Events
on the resource, and a spec's first validation error in one line naming its field."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import kopf
import pydantic

from .metrics import EVENTS
from .notices import Notice


def post(body: Mapping[str, Any], batch: Sequence[Notice]) -> None:
    for notice in batch:
        kopf.event(
            body,  # type: ignore[arg-type]  # a plain mapping is what kopf reads of it
            type=notice.type,
            reason=notice.reason,
            message=notice.message[:1024],
        )
        EVENTS.labels(notice.reason).inc()


def first_error(err: pydantic.ValidationError) -> str:
    """The first validation error, naming its field (``spec.concurrencyPolicy: ...``)."""
    first = err.errors()[0]
    where = ".".join(str(p) for p in first["loc"])
    return f"spec.{where}: {first['msg']}"
