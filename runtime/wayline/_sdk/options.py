"""Engine options kept apart from a workflow's own arguments: ``ChildOptions`` and the one
rule that reads the old option keywords (``child(wf, timeout=...)``, ``start(wf, queue=...)``).

An option given as a keyword shares its namespace with the workflow's parameters, so a
workflow parameter named ``timeout`` or ``queue`` was swallowed by the option. The options
objects go first, before the workflow, and everything after the workflow is the workflow's.
"""

from __future__ import annotations

import inspect
import warnings
from dataclasses import dataclass
from typing import Any

from .._core import ordering
from .._core.business_keys import check_business_id
from .._core.definitions import WorkflowDefinition
from ..durations import Duration, to_seconds

_BY_KEYWORD = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)


@dataclass(frozen=True)
class ChildOptions:
    """How :func:`wayline.child_with` starts and awaits a child run.

    ``timeout``: the wait for the child's result ends with :class:`ChildTimeoutError` that
    long after the child was created (a restart grants no fresh window); the child is not
    cancelled. A duration as ``wayline.sleep`` takes it; a bad one raises ``ValueError``
    here, before any child is written.

    ``id``: a business id for the child (as ``StartOptions(id=...)``, in the parent's
    namespace), so ``wayline runs show <id>`` and every call that takes a run id find it. The
    parent records the child's run id when it claims the child, so a replay resumes the same
    run. The child is the id's next run when the id names none or only ended ones (Temporal's
    default reuse policy); while a run under the id is live, no child is started and the
    parent's wait raises :class:`ChildFailedError` with ``error["code"] ==
    "RUN_ALREADY_EXISTS"`` (Temporal's "workflow already started"). A bad id raises
    :class:`InvalidIdError` here.

    ``priority``: the child's priority (0 to 9, as ``StartOptions(priority=)``) instead of its
    parent's; its fairness key stays its parent's. A bad one raises ``ValueError`` here."""

    timeout: Duration | None = None
    id: str | None = None
    priority: int | None = None

    def __post_init__(self) -> None:
        if self.priority is not None:
            ordering.check(self.priority, None, 1)
        if self.timeout is not None:
            to_seconds(self.timeout)
        if self.id is not None:
            check_business_id(self.id)


def take_option_keywords(
    definition: WorkflowDefinition[..., Any] | None,
    kwargs: dict[str, Any],
    names: tuple[str, ...],
    *,
    call: str,
    new_form: str,
    stacklevel: int,
    unknown: tuple[str, ...] | None = None,
) -> dict[str, Any]:
    """Remove from ``kwargs`` and return the keywords of ``names`` that are options (the old
    form of ``call``), warning that the form is deprecated. A keyword that ``definition``
    takes as a parameter of that name stays in ``kwargs``: it is the workflow's argument.
    Without a definition (a start by a name this client does not know) the keywords of
    ``unknown`` (default: all of ``names``) are options, as they always were, and any other
    is the workflow's: ``id=`` given to a start by name went to the workflow before business
    ids existed, and still does."""
    taken: dict[str, Any] = {}
    for name in names:
        if name not in kwargs:
            continue
        if definition is None and unknown is not None and name not in unknown:
            continue
        if definition is not None:
            parameter = definition.signature.sig.parameters.get(name)
            if parameter is not None and parameter.kind in _BY_KEYWORD:
                continue
        taken[name] = kwargs.pop(name)
    if taken:
        given = ", ".join(f"{name}=" for name in taken)
        warnings.warn(
            f"{call}(..., {given}) is deprecated: use {new_form}, so the workflow's own "
            "arguments are never taken for options",
            DeprecationWarning,
            stacklevel=stacklevel + 1,
        )
    return taken
