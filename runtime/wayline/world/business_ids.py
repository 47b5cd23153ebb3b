"""Business ids: a run named by the caller's own key (``"order-123"``) instead of a ``wf_`` id.

A business id names a chain of runs, its generations. Generation ``n`` of business id ``B``,
started by a client of namespace ``N`` (or none), is the run whose id is ``wf_`` and the first
32 hex digits of SHA-256 over ``(N, B, n)``; its ``run_created`` records ``B`` as
``businessId``. Nothing else is stored, so both worlds serve business ids with the reads and
writes they already have: the newest run of ``B`` is found by reading generations 0, 1, 2, ...
until one is missing (one ``World.get_run`` per generation), and a new generation is created by
the usual first append with ``expected_seq=0``, which only one of two racing starters wins.

The probe stops at the first missing generation, so a business id whose older generations
were deleted (``wayline cleanup``, ``wayline archive``) while a newer one was kept resolves to
nothing; deleting all of them frees the id for a new generation 0.
"""

from __future__ import annotations

import hashlib
import json
from typing import Literal, get_args

from .._core.events import RunStatus
from .._core.ids import is_run_id
from ..errors import CorruptLogError, InvalidIdError
from .seam import World

MAX_BUSINESS_ID_LENGTH = 256
"""Characters. Long enough for a composite key (a tenant, an order and a line, say), short
enough to print on one line of ``wayline runs list``."""

IdConflictPolicy = Literal["use_existing", "fail"]
"""What ``Client.start`` does when the id names a run that it does not start anew:
``use_existing`` returns that run's handle, ``fail`` raises ``RunAlreadyExistsError``."""

IdReusePolicy = Literal["allow_duplicate", "allow_duplicate_failed_only", "reject_duplicate"]
"""Whether ``Client.start`` starts a new run under a business id whose newest run has ended:
always, only when it ended failed or cancelled, or never."""

ID_CONFLICT_POLICIES: tuple[str, ...] = get_args(IdConflictPolicy)
ID_REUSE_POLICIES: tuple[str, ...] = get_args(IdReusePolicy)

_UNSUCCESSFUL = frozenset({RunStatus.FAILED, RunStatus.CANCELLED})
"""The ends after which ``allow_duplicate_failed_only`` starts anew (Temporal's "failed,
cancelled, terminated or timed out"). A terminated run ended cancelled, and a run that gave up
waiting (a hook timeout or child deadline it did not catch) ended failed."""


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


async def newest_generation(
    world: World, business_id: str, namespace: str | None, start: int = 0
) -> int:
    """The newest generation of ``business_id`` at ``start`` or after; ``start - 1`` when
    generation ``start`` does not exist (-1 from 0: the id names no run). A generation whose
    log does not read exists all the same: the call made with the id then raises its
    ``CorruptLogError`` instead of a newer generation taking its place."""
    generation = start
    while True:
        run_id = generation_run_id(business_id, namespace, generation)
        try:
            exists = await world.get_run(run_id) is not None
        except CorruptLogError:
            exists = True
        if not exists:
            return generation - 1
        generation += 1


def may_start_anew(policy: str, status: RunStatus) -> bool:
    """Whether ``policy`` starts a new generation after one that ended ``status``."""
    if policy == "allow_duplicate":
        return True
    if policy == "allow_duplicate_failed_only":
        return status in _UNSUCCESSFUL
    return False


def check_start_ids(
    run_id: str | None, business_id: str | None, id_conflict: str, id_reuse: str
) -> None:
    """Refuse the id options of a ``Client.start`` that cannot go together or are unknown."""
    if id_conflict not in ID_CONFLICT_POLICIES:
        raise InvalidIdError(
            f"id_conflict is one of {', '.join(ID_CONFLICT_POLICIES)}, not {id_conflict!r}"
        )
    if id_reuse not in ID_REUSE_POLICIES:
        raise InvalidIdError(f"id_reuse is one of {', '.join(ID_REUSE_POLICIES)}, not {id_reuse!r}")
    if business_id is not None:
        if run_id is not None:
            raise InvalidIdError("give a run id= or run_id=, not both")
        check_business_id(business_id)
    elif run_id is not None and not is_run_id(run_id):
        raise InvalidIdError(
            f"a run id is 'wf_' and 32 lowercase hex digits, not {run_id!r} (a business id "
            "such as 'order-123' is given as id=)"
        )
    elif id_reuse != "reject_duplicate":
        raise InvalidIdError(
            f"id_reuse={id_reuse!r} needs id=: a run id names one run, never started again"
        )
