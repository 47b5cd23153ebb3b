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

from typing import Literal, get_args

from .._core.business_keys import MAX_BUSINESS_ID_LENGTH, check_business_id, generation_run_id
from .._core.events import RunStatus
from .._core.ids import is_run_id
from ..errors import CorruptLogError, InvalidIdError
from .seam import World

IdConflictPolicy = Literal["use_existing", "fail"]
"""What ``Client.start`` does when the id names a run that it does not start anew:
``use_existing`` returns that run's handle, ``fail`` raises ``RunAlreadyExistsError``."""

IdReusePolicy = Literal["allow_duplicate", "allow_duplicate_failed_only", "reject_duplicate"]
"""Whether ``Client.start`` starts a new run under a business id whose newest run has ended:
always, only when it ended failed or cancelled, or never."""

ID_CONFLICT_POLICIES: tuple[str, ...] = get_args(IdConflictPolicy)
ID_REUSE_POLICIES: tuple[str, ...] = get_args(IdReusePolicy)
__all__ = ["MAX_BUSINESS_ID_LENGTH", "check_business_id", "generation_run_id"]

_UNSUCCESSFUL = frozenset({RunStatus.FAILED, RunStatus.CANCELLED})
"""The ends after which ``allow_duplicate_failed_only`` starts anew (Temporal's "failed,
cancelled, terminated or timed out"). A terminated run ended cancelled, and a run that gave up
waiting (a hook timeout or child deadline it did not catch) ended failed."""


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
    """Whether ``policy`` starts a new generation after one that ended ``status``. Never
    after a run that continued as new: its chain goes on in the next generation, which its
    continuation creates (only in the moment before that creation is it the newest)."""
    if status is RunStatus.CONTINUED_AS_NEW:
        return False
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
