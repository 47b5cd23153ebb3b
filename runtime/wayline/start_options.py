"""``StartOptions``: how ``Client.start_with`` starts a run, apart from the workflow's
arguments (see ``_sdk/options.py`` for why options no longer share their keywords)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ._core import ordering, search_attributes
from ._core.ordering import (
    DEFAULT_PRIORITY as DEFAULT_PRIORITY,
)
from ._core.ordering import (
    MAX_FAIRNESS_KEY_CHARS as MAX_FAIRNESS_KEY_CHARS,
)
from ._core.ordering import (
    MAX_PRIORITY as MAX_PRIORITY,
)
from ._core.ordering import (
    MIN_PRIORITY as MIN_PRIORITY,
)
from .durations import Duration, to_seconds
from .errors import InvalidPayloadError
from .world.business_ids import IdConflictPolicy, IdReusePolicy, check_start_ids
from .world.hook_buffer import MAX_BUFFER_SECONDS

START_OPTION_NAMES = ("run_id", "id", "id_conflict", "id_reuse", "queue")
"""The fields of :class:`StartOptions` that were once keywords of ``Client.start``."""


@dataclass(frozen=True)
class StartOptions:
    """How :meth:`Client.start_with` starts a run. Refused at construction, before anything
    is written: an id no run can have, an unknown policy, ``id`` with ``run_id``, and
    ``id_reuse`` without ``id`` (:class:`InvalidIdError`).

    ``run_id`` (``wf_`` + 32 hex digits) makes the start idempotent: repeating it, after any
    crash, starts no second run and only re-sends the start (none once the run has ended).

    ``id`` (a business id such as ``"order-123"``: 1 to 256 printable characters, no leading
    or trailing space, not itself a ``wf_`` run id) derives the run id from ``id`` and the
    client's namespace, and records ``id`` as the run's ``business_id``; every call that
    takes a run id takes ``id`` too. When the newest run of ``id`` has ended, ``id_reuse``
    decides whether a new run starts under it: ``"allow_duplicate"`` always,
    ``"allow_duplicate_failed_only"`` only after a run that failed or was cancelled,
    ``"reject_duplicate"`` (the default) never. When a run of ``id`` (or ``run_id``) exists
    and none is started, ``id_conflict`` decides: ``"use_existing"`` (the default) returns
    its handle (re-sending its start while it is live, as a repeated ``run_id`` start does),
    ``"fail"`` raises :class:`RunAlreadyExistsError`. So by default
    ``start_with(StartOptions(id="order-123"), wf)`` starts one run per id, ever, and
    returns that run to every later call, ended or not.

    ``queue``: the run is served by the workers started with that ``queue=`` instead of by
    those serving the workflow by name.

    ``attributes``: search attributes the run starts with (str, int, float, bool, a
    timezone-aware datetime, a list of str), over those of ``@workflow(attributes=...)`` key
    by key; a bad name or value is an :class:`InvalidAttributesError` here. A start that
    finds its run already there (``id_conflict="use_existing"``) changes none of its
    attributes.

    ``hooks`` (``{token: payload}``, signal-with-start) stores each payload before the run is
    created, for the started run alone: its first hook holding the token receives it at once.
    A payload its run never waits for is dropped after ``hooks_buffer`` (a duration, one day
    by default, at most a week). Stored as ``Client.resume_hook(..., buffer=)`` stores, so a
    token with a payload waiting already is refused (:class:`HookBufferOccupiedError`).

    ``memo`` (Temporal's memo): up to 16 string keys and values that the run's ``run_created``
    records and ``RunInfo.attributes["memo"]`` shows; nothing else reads them. Written once,
    with the run: a start that finds the run existing keeps the memo it was created with, so
    a memo tells who created a run (the operator records its WorkflowRun's uid there).

    ``priority`` (0 to 9, lower first; 5 by default), ``fairness_key`` (a tenant's name, 1 to
    256 characters) and ``fairness_weight`` (1 to 100, 1 by default): how the run's work is
    ordered among the ready work of every run, as docs/sdk.md "Priority and fairness" says.
    A worker with a free slot takes the lowest priority first, lifting work one level for
    each ``wayline._core.ordering.AGING_SECONDS`` it waited, and within a level serves the
    fairness keys in turn, ``fairness_weight`` turns per round. Recorded in the run's
    ``run_created`` and carried by every message of the run, its children's included. A value
    out of bounds is a ``ValueError`` here."""

    id: str | None = None
    run_id: str | None = None
    queue: str | None = None
    id_conflict: IdConflictPolicy = "use_existing"
    id_reuse: IdReusePolicy = "reject_duplicate"
    hooks: Mapping[str, Any] = field(default_factory=dict)
    hooks_buffer: Duration = "1d"
    attributes: Mapping[str, Any] | None = None
    memo: Mapping[str, str] | None = None
    priority: int = ordering.DEFAULT_PRIORITY
    fairness_key: str | None = None
    fairness_weight: int = 1

    def __post_init__(self) -> None:
        check_start_ids(self.run_id, self.id, self.id_conflict, self.id_reuse)
        ordering.check(self.priority, self.fairness_key, self.fairness_weight)
        if self.fairness_weight != 1 and self.fairness_key is None:
            # A weight says how many turns a fairness key gets per round: without a key the
            # run has no turn to weigh, and dropping the weight silently hides the mistake.
            raise ValueError(
                ordering.WEIGHT_WITHOUT_KEY.format(weight="fairness_weight", key="fairness_key")
            )
        for token in self.hooks:
            if not isinstance(token, str) or not token:
                raise ValueError(f"a hook token in hooks= is a non-empty string, not {token!r}")
        seconds = to_seconds(self.hooks_buffer)
        if not 0 < seconds <= MAX_BUFFER_SECONDS:
            raise ValueError(
                f"hooks_buffer= is more than 0 and at most {MAX_BUFFER_SECONDS:.0f} seconds, "
                f"not {self.hooks_buffer!r}"
            )
        if self.attributes is not None:
            if not isinstance(self.attributes, Mapping):
                raise TypeError(
                    f"attributes is a mapping of names to values, not {self.attributes!r}"
                )
            search_attributes.encode(self.attributes)
        if self.memo is not None:
            check_memo(self.memo)


MAX_MEMO_ENTRIES = 16
MAX_MEMO_CHARS = 256
"""Per key and per value: a memo names who or what created a run, it carries no payload
(that is the input's job, with its own limits)."""


def check_memo(memo: object) -> None:
    """Refuse a memo that is not a small mapping of strings to strings, saying why."""
    if not isinstance(memo, Mapping):
        raise InvalidPayloadError(f"a memo maps strings to strings, not {type(memo).__name__}")
    if len(memo) > MAX_MEMO_ENTRIES:
        raise InvalidPayloadError(f"a memo has at most {MAX_MEMO_ENTRIES} entries, not {len(memo)}")
    for key, value in memo.items():
        for what, text in (("key", key), ("value", value)):
            if not isinstance(text, str):
                raise InvalidPayloadError(
                    f"memo {what} {text!r} is a {type(text).__name__}, not a string"
                )
            if len(text) > MAX_MEMO_CHARS or (what == "key" and not text):
                raise InvalidPayloadError(
                    f"a memo {what} has {'1' if what == 'key' else '0'} to {MAX_MEMO_CHARS} "
                    f"characters, not {len(text)}: {text[:40]!r}"
                )
