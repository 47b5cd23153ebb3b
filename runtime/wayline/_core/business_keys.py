"""What a business id is, and the run id of each of its generations: plain functions that the
client (``Client.start``) and the SDK (``ChildOptions(id=...)``) share. The world-reading half
(finding a business id's newest generation) is ``world.business_ids``."""

from __future__ import annotations

import hashlib
import json

from ..errors import InvalidIdError
from .ids import is_run_id

MAX_BUSINESS_ID_LENGTH = 256
"""Characters. Long enough for a composite key (a tenant, an order and a line, say), short
enough to print on one line of ``wayline runs list``."""


def check_business_id(value: object) -> str:
    """``value`` if it is a business id; raises :class:`InvalidIdError` saying why not."""
    if not isinstance(value, str):
        raise InvalidIdError(f"an id is a string, not {type(value).__name__}")
    shown = value if len(value) <= 80 else value[:80] + "..."
    if not value or len(value) > MAX_BUSINESS_ID_LENGTH:
        raise InvalidIdError(
            f"an id has 1 to {MAX_BUSINESS_ID_LENGTH} characters, not {len(value)}: {shown!r}"
        )
    if not value.isprintable():
        raise InvalidIdError(
            f"an id has printable characters only, no control characters: {shown!r}"
        )
    if value != value.strip():
        # "order-123 " and "order-123" would name two different runs: a pasted id's stray
        # space is refused rather than silently starting a second run
        raise InvalidIdError(f"an id neither starts nor ends with a space: {shown!r}")
    if is_run_id(value):
        # every call that takes a run id reads a well-formed run id as one, never as a
        # business id: starting "wf_..." as a business id could never be found by it again
        raise InvalidIdError(f"{value!r} is a run id; start it with run_id= instead of id=")
    return value


def generation_run_id(business_id: str, namespace: str | None, generation: int) -> str:
    """The run id of generation ``generation`` of ``business_id`` in ``namespace``."""
    # JSON keeps the three parts apart whatever characters they hold
    key = json.dumps(["wayline.business-id", namespace or "", business_id, generation])
    return "wf_" + hashlib.sha256(key.encode()).hexdigest()[:32]
