"""Payloads sent before the wait: a store of hook payloads for tokens no hook holds yet.

One entry per ``(namespace, token)`` (``""`` for runs of no namespace). ``resume_hook(...,
buffer=)`` stores one; the first hook that a run of that namespace creates for the token takes
it. Whoever takes an entry delivers it, and a take is atomic in each world (SQLite: one
``UPDATE`` in a write transaction; NATS: a KV update on the revision read), so of a worker that
just created the hook and a resumer that just stored the entry and then found the hook, exactly
one delivers it (docs/day2.md, "Messages sent before the wait").

A taken entry is kept, marked with the run that took it, until it expires: a resumer retrying
with the same delivery id then finds it and stores nothing twice. Expired entries are never
taken and are swept by every store. The decisions (store, take) are pure functions of the
entry read, here, so both worlds decide alike; each world only makes them atomic.
"""

from __future__ import annotations

import abc
import logging
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from ..errors import HookBufferOccupiedError
from . import entries

log = logging.getLogger("wayline.world.hook_buffer")

MAX_BUFFER_SECONDS = 7 * 24 * 3600.0
"""The longest a payload may wait for its hook: a week, long enough for an approval sent
ahead of a weekly batch, short enough that a store never keeps a forgotten one for ever (the
NATS bucket drops any entry this long after its last write)."""


@dataclass(frozen=True, slots=True)
class BufferedPayload:
    """One stored payload. ``payload`` is its JSON value (as ``serde.encode`` made it);
    ``entry_id`` is the resumer's delivery id, or a fresh one, and becomes the delivery id of
    the ``hook_received`` that delivers it; ``taken_by`` is the run that took it, or None."""

    namespace: str
    token: str
    entry_id: str
    payload: Any
    created_at: float
    expires_at: float
    taken_by: str | None = None
    for_run: str | None = None
    """Set by a start with ``StartOptions(hooks=)``: only that run's hook takes it."""

    def expired(self, now: float) -> bool:
        return self.expires_at <= now

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "namespace": self.namespace,
            "token": self.token,
            "entryId": self.entry_id,
            "payload": self.payload,
            "createdAt": self.created_at,
            "expiresAt": self.expires_at,
        }
        if self.taken_by is not None:
            out["takenBy"] = self.taken_by
        if self.for_run is not None:
            out["forRun"] = self.for_run
        return out


def read_entry(raw: bytes | str, where: str) -> BufferedPayload | None:
    """The entry stored as ``raw``, or None (logged) when the bytes are not one: anyone who
    can write to the store can put anything there, and it must never stop a worker."""
    try:
        data = entries.loads_object(raw)
    except entries.Unreadable as err:
        log.warning("hook buffer entry %s passed over: %s", where, err)
        return None
    texts = [data.get(k) for k in ("namespace", "token", "entryId")]
    created, expires = (
        entries.seconds(data.get("createdAt")),
        entries.seconds(data.get("expiresAt")),
    )
    taken, for_run = data.get("takenBy"), data.get("forRun")
    if (
        not all(isinstance(t, str) for t in texts)
        or "payload" not in data
        or created is None
        or expires is None
        or not (taken is None or isinstance(taken, str))
        or not (for_run is None or isinstance(for_run, str))
    ):
        log.warning("hook buffer entry %s passed over: not a buffered payload", where)
        return None
    namespace, token, entry_id = (str(t) for t in texts)
    return BufferedPayload(
        namespace, token, entry_id, data["payload"], created, expires, taken, for_run
    )


def to_store(existing: BufferedPayload | None, new: BufferedPayload, now: float) -> bool:
    """Whether ``new`` replaces ``existing`` (the entry read for its key). False: ``existing``
    is ``new`` stored before (the same entry id: a repeated delivery id), kept as it is, taken
    or not. Raises :class:`HookBufferOccupiedError` when another payload waits for the token:
    a second one is refused rather than queued, so a hook that takes one payload and is
    disposed (``Hook.wait``) never leaves a stray one for the next hook of the token."""
    if existing is None or existing.expired(now):
        return True
    if existing.entry_id == new.entry_id:
        return False
    if existing.taken_by is not None:
        return True  # a tombstone of a payload delivered already: the token is free again
    until = datetime.fromtimestamp(existing.expires_at, UTC).strftime("%Y-%m-%d %H:%M:%S")
    raise HookBufferOccupiedError(
        f"a payload for hook {new.token!r} is buffered already (until {until} UTC); it has "
        "to be taken or expire before another is buffered",
        token=new.token,
    )


def to_take(existing: BufferedPayload | None, run_id: str, now: float) -> BufferedPayload | None:
    """The entry as taken by ``run_id``, or None when there is nothing to take."""
    if existing is None or existing.taken_by is not None or existing.expired(now):
        return None
    if existing.for_run is not None and existing.for_run != run_id:
        return None  # signal-with-start: the payload is the started run's
    return replace(existing, taken_by=run_id)


class HookBuffer(abc.ABC):
    """A world's store of buffered payloads (:meth:`World.hook_buffer`)."""

    @abc.abstractmethod
    async def store(self, entry: BufferedPayload) -> BufferedPayload:
        """Store ``entry`` as :func:`to_store` decides, atomically; returns what is stored for
        its key now (the earlier entry when it had the same id)."""

    @abc.abstractmethod
    async def get(self, namespace: str, token: str) -> BufferedPayload | None:
        """The entry for the key, taken or not, expired or not."""

    @abc.abstractmethod
    async def take(self, namespace: str, token: str, run_id: str) -> BufferedPayload | None:
        """Mark the entry for the key taken by ``run_id`` if it is neither taken nor expired,
        atomically: of two racing takers one gets the entry, the other None."""

    @abc.abstractmethod
    async def give_back(self, entry: BufferedPayload) -> None:
        """Undo a take whose delivery failed (the hook was gone by then), if the entry is
        still as that take left it."""

    @abc.abstractmethod
    async def sweep(self) -> int:
        """Delete expired entries; returns how many."""
