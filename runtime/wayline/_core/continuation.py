"""``wayline.continue_as_new``: what a run that continues as new hands to its next run.

A run that continues ends with ``run_continued_as_new``, which names its next run and records
that run's whole ``run_created`` data; the next run is created from that record alone. So a
delivery that dies between the end and the creation is redelivered, finds the run ended and
creates the same run from the same record (``_engine.continuation``): the next run's id is
derived from the ending run's, never drawn at random, and its creation is the usual first
append with ``expected_seq=0``, which a second attempt finds done.

What the next run keeps: its workflow, queue, namespace, parent (a child's chain reports to its
parent from its last run), memo, business id (as the id's next generation), and search
attributes as they stand at the continue (``set_attributes`` calls included). Its definition:
only when the workflow asks (``wayline.continue_as_new_keeping_version``). Otherwise the next
run records none, as a run started by name, and the first worker that begins it pins it: a
chain that loops for ever moves to the version deployed when each of its runs begins, so it
does not keep an old WorkflowWorker version (which takes no new run) alive for ever. What it
does not keep: payloads buffered for the old run's hooks (its hooks end with it), its steps,
waits and patch markers (the next run starts a fresh log), and its children, which must have
ended (a continue with a child still running raises :class:`ContinueAsNewError`, as Temporal
refuses one).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from ..errors import WaylineError
from .business_keys import generation_run_id
from .projections import CONTINUED_FROM
from .search_attributes import SEARCH_KEY

FIRST_RUN_ID = "firstRunId"
"""The ``run_created`` field of a continuing run naming the first run of its chain."""
GENERATION = "generation"
"""The ``run_created`` field of a continuing run: its business id's generation."""

_CARRIED = (
    "queue",
    "namespace",
    "businessId",
    "memo",
    "parent",
    # the run's place among ready work (``StartOptions(priority=, fairness_key=)``)
    "priority",
    "fairnessKey",
    "fairnessWeight",
)
"""The ``run_created`` fields the next run keeps as they are (see the module's docstring)."""

_GENERATIONS_PROBED = 100_000
"""How far the generation of a business id's run is searched for when its ``run_created`` does
not record it (a run a client started). A hash each, no reads."""


class ContinueAsNew(BaseException):
    """Raised by ``wayline.continue_as_new`` through the workflow: the run ends and its next
    run starts with ``args`` and ``kwargs``. A BaseException so that a workflow's ``except
    Exception`` does not swallow it."""

    def __init__(
        self, args: tuple[Any, ...], kwargs: Mapping[str, Any], *, keep_version: bool = False
    ) -> None:
        super().__init__("continue as new")
        self.next_args = args
        self.next_kwargs = dict(kwargs)
        self.keep_version = keep_version
        """The next run is pinned to the continuing worker's definition, not begun afresh."""


class ContinueAsNewError(WaylineError):
    """``wayline.continue_as_new`` called while a child run is still running."""

    code = "CONTINUE_AS_NEW_WITH_CHILDREN"


def next_run_id(run_id: str, created: Mapping[str, Any]) -> tuple[str, int | None]:
    """The id of the run that continues ``run_id`` (whose ``run_created`` data is
    ``created``), and its business id's generation (None without one). The same every time it
    is asked, so a repeat after a crash names the same run."""
    business_id = created.get("businessId")
    if isinstance(business_id, str):
        namespace = created.get("namespace")
        namespace = namespace if isinstance(namespace, str) else None
        generation = _generation(run_id, business_id, namespace, created.get(GENERATION))
        if generation is not None:
            return generation_run_id(business_id, namespace, generation + 1), generation + 1
    key = json.dumps(["wayline.continue-as-new", run_id])
    return "wf_" + hashlib.sha256(key.encode()).hexdigest()[:32], None


def _generation(run_id: str, business_id: str, namespace: str | None, recorded: Any) -> int | None:
    if isinstance(recorded, int) and generation_run_id(business_id, namespace, recorded) == run_id:
        return recorded
    for generation in range(_GENERATIONS_PROBED):
        if generation_run_id(business_id, namespace, generation) == run_id:
            return generation
    return None  # not a run of its business id's chain (never written so): a derived id


def next_run_data(
    run_id: str,
    created: Mapping[str, Any],
    *,
    workflow: str,
    stored_input: Any,
    revision: int,
    definition: Mapping[str, Any] | None,
    search: Mapping[str, Any],
) -> tuple[str, dict[str, Any]]:
    """The next run's id and its ``run_created`` data, from the ending run's ``created`` data
    and what the continue gives it: the encoded input, the worker's definition when the
    workflow keeps its version (the next run is then routed as this one; None: it is pinned
    by the worker that begins it) and the search attributes as they stand."""
    next_id, generation = next_run_id(run_id, created)
    data: dict[str, Any] = {"workflow": workflow, "input": stored_input}
    data.update({k: created[k] for k in _CARRIED if k in created})
    if definition is not None:
        data["revision"] = revision
        data["definition"] = dict(definition)
    if search:
        data[SEARCH_KEY] = dict(search)
    data[CONTINUED_FROM] = run_id
    first = created.get(FIRST_RUN_ID)
    data[FIRST_RUN_ID] = first if isinstance(first, str) else run_id
    if generation is not None:
        data[GENERATION] = generation
    return next_id, data
