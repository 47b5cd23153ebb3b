"""Out-of-line payloads: large values live in a blob store, their events carry a reference.

An event-log message must stay small (NATS's default ``max_payload`` is 1 MiB, and every
replay reads the whole log), yet inputs, step arguments and results, hook payloads and a run's
output may be up to their limits (64 MiB by default, ``Settings``). A world therefore passes
every batch it appends through :meth:`OutOfLine.stow` and every event and run view it reads
through :meth:`OutOfLine.resolve` / :meth:`OutOfLine.resolve_info`: the engine never sees a
reference, and the rules every append obeys (``events.apply_transition``) never read payloads.

A payload is one top-level value of an event's data under one of :data:`PAYLOAD_KEYS`. Stowed,
it is replaced by ``{"$wayline.blob": "<sha256 of its compact JSON>", "bytes": n}`` and its
JSON is put in the world's :class:`BlobStore` under ``(run id, digest)``: a retried write of
the same value lands on the same name (idempotent), and a run's blobs are named by the run, so
its cleanup removes them and no other run can reach them. A world whose store outlives a run
id's log (NATS keeps an archived run's objects in the bucket the live runs use) also names the
run's incarnation: the reference then carries ``"incarnation": "<id>"``, and the blob is stored
under ``(run id, incarnation, digest)``, so a run id started again after its archive never
shares an object with the archived run, and the cleanup of one incarnation never deletes
another's. A reference without one (written before incarnations were named, or by a world that
does not name them) is read under ``(run id, digest)``. A user value that merely looks like
a reference is stowed too, whatever its size: a reference read back is always one Wayline
wrote. A reference whose blob is gone, or whose bytes do not hash to its digest, raises
:class:`BlobMissingError` (``CORRUPT_LOG``): the run is fenced like any unreadable entry.

Blobs never change once written, so what was read is kept (:class:`_Cache`, bounded by bytes):
a run is replayed many times, and each replay re-reads its log. It keeps a string (immutable) as
it is and any other value as its JSON, decoded afresh for each reader: a workflow that mutates a
value it was given, or a step body that keeps mutating the object it returned, never changes
what a later replay reads.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any, Protocol

from .._core import jsoncodec
from .._core.events import Event, NewEvent
from .._core.limits import json_bound
from .._core.projections import RunInfo
from ..errors import BlobMissingError, ConfigurationError
from .entries import Unreadable, loads
from .ports.blobs import BlobRef, PayloadField, digest_of

REF = "$wayline.blob"
INCARNATION = "incarnation"
"""The field of a reference naming the incarnation of the run id its blob was stored for."""
PAYLOAD_KEYS = ("input", "output", "result", "payload", "metadata", "forwardResult")
"""The event-data fields that hold user values (every other field is Wayline's, and small)."""

ORPHAN_GRACE_SECONDS = 3600.0
"""How old a blob of a run id that has no run must be before cleanup deletes it. A blob is
stored before the append that names it, so such a blob may be a start in flight; an hour is far
past any append's deadline, so one that old is the start of a process that died between the
two, or of an append that was refused, and no event will ever name it."""


def orphan_grace(seconds: float) -> float:
    """``seconds`` as a world's orphan grace, or a :class:`ConfigurationError`: a grace of
    zero or less would let cleanup delete the blob of a start in flight, before its append."""
    if not isinstance(seconds, (int, float)) or isinstance(seconds, bool) or not seconds > 0:
        raise ConfigurationError(
            f"orphan_grace_seconds={seconds!r} must be a positive number of seconds: a blob "
            "younger than it may be a start in flight (the default is an hour)"
        )
    return float(seconds)


_CACHE_BYTES = 256 * 1024 * 1024
"""Decoded blobs kept per world, by the size of their JSON."""


class BlobStore(Protocol):
    """What a world offers for out-of-line payloads. ``name`` says where, for errors."""

    name: str

    async def put(
        self, run_id: str, digest: str, data: bytes, *, incarnation: str | None = None
    ) -> None:
        """Store ``data`` (whose sha256 is ``digest``) for the run's ``incarnation`` (None: the
        name without one); a no-op if it is stored already."""
        ...

    async def get(
        self, run_id: str, digest: str, *, incarnation: str | None = None
    ) -> bytes | None:
        """The stored bytes, or None when there are none."""
        ...


Incarnation = Callable[[], Awaitable[str | None]]
"""What an append asks, only when it stows a payload: the incarnation of the run it appends
to (None: blobs named by run and digest alone)."""


def incarnation_of(ref: Mapping[str, Any]) -> str | None:
    """The incarnation a reference names; raises ValueError when it names one no writer
    makes (anyone who can write the log can write a reference)."""
    found = ref.get(INCARNATION)
    if found is None:
        return None
    if not is_incarnation(found):
        raise ValueError(f"incarnation {str(found)[:40]!r}")
    return str(found)


def is_incarnation(value: Any) -> bool:
    """An incarnation is one plain name segment: 1 to 64 ASCII letters and digits."""
    return isinstance(value, str) and 0 < len(value) <= 64 and value.isascii() and value.isalnum()


def is_ref(value: Any) -> bool:
    return type(value) is dict and REF in value


def blob_ref(value: Any, seq: int = 0) -> BlobRef | None:
    """The port's :class:`BlobRef` for a reference read from a log or a run view; None for a
    value that is not a reference, or a reference no writer makes (a malformed one is left to
    :meth:`OutOfLine.resolve`, which fences the run)."""
    if not is_ref(value):
        return None
    digest, size = value.get(REF), value.get("bytes")
    try:
        named = incarnation_of(value)
    except ValueError:
        return None
    if not isinstance(digest, str) or len(digest) != 64 or type(size) is not int or size < 0:
        return None
    return BlobRef(digest, size, named, seq)


def payload_field(info: RunInfo | None, which: PayloadField) -> BlobRef | None:
    """The blob a run view's (unresolved) input or output is stored in, if it is one; the
    input's event is the log's first, the output's its last (as in :meth:`resolve_info`)."""
    if info is None:
        return None
    if which == "input":
        return blob_ref(info.input, 1)
    return blob_ref(info.output, info.last_seq)


_SMALL = 1024
"""Payloads whose JSON is at most this many bytes never count towards a batch's total."""


def _measure(value: Any, limit: int) -> tuple[int, bytes | None]:
    """Bytes of ``value``'s compact JSON and that JSON, or a bound at most ``min(limit,
    _SMALL)`` when it can neither be over ``limit`` nor count towards a batch (most payloads
    are small scalars and short strings: no need to encode them here). A character is at
    most 12 bytes of JSON: ``ensure_ascii`` writes one outside the BMP as two ``\\uXXXX``."""
    bound = json_bound(value)
    if 0 <= bound <= min(limit, _SMALL):
        return bound, None
    data = dumps(value)
    return len(data), data


def dumps(value: Any) -> bytes:
    """Compact JSON, as bytes, in the process's codec (``wayline._core.jsoncodec``)."""
    return jsoncodec.dumps(value)


def _frozen(value: Any, data: bytes) -> Any:
    """What the cache keeps of a payload whose JSON is ``data`` (see the module docstring)."""
    return value if type(value) is str else data


def _thawed(kept: Any) -> Any:
    """A reader's own copy of a cached payload (JSON never decodes to bytes)."""
    return loads(kept) if type(kept) is bytes else kept


class _Cache:
    def __init__(self, capacity: int) -> None:
        self._items: OrderedDict[tuple[str, str], tuple[Any, int]] = OrderedDict()
        self._bytes = 0
        self._capacity = capacity

    def get(self, key: tuple[str, str]) -> tuple[Any, int] | None:
        found = self._items.get(key)
        if found is not None:
            self._items.move_to_end(key)
        return found

    def put(self, key: tuple[str, str], value: Any, size: int) -> None:
        if size > self._capacity or key in self._items:
            return
        self._items[key] = (value, size)
        self._bytes += size
        while self._bytes > self._capacity:
            _, (_, dropped) = self._items.popitem(last=False)
            self._bytes -= dropped


class OutOfLine:
    """Stows and resolves the payloads of one world's events (see the module docstring)."""

    def __init__(self, store: BlobStore, threshold: int, cache_bytes: int = _CACHE_BYTES) -> None:
        self.store = store
        self.threshold = threshold
        self._cache = _Cache(cache_bytes)

    # writing -------------------------------------------------------------------------------
    async def append(
        self,
        run_id: str,
        events: Sequence[NewEvent],
        write: Callable[[Sequence[NewEvent]], Awaitable[list[Event]]],
        incarnation: Incarnation | None = None,
    ) -> list[Event]:
        """``write`` (a world's append) of ``events`` stowed; the events it returns carry
        the values again, as the caller gave them. ``incarnation`` is asked only when a
        payload is stowed."""
        stowed = await self.stow(run_id, events, incarnation)
        stored = await write(stowed)
        if stowed is events:
            return stored
        return [
            ev if new is orig else replace(ev, data=dict(orig.data))
            for ev, new, orig in zip(stored, stowed, events, strict=False)
        ]

    async def stow(
        self, run_id: str, events: Sequence[NewEvent], incarnation: Incarnation | None = None
    ) -> Sequence[NewEvent]:
        """``events`` with their large payloads replaced by references, the blobs stored
        first (an event never names a blob that is not there yet). The same list when nothing
        is large, which is the common case."""
        chosen = self._choose(events)
        if not chosen:
            return events
        named = await incarnation() if incarnation is not None else None
        out: dict[int, dict[str, Any]] = {}
        puts: dict[str, bytes] = {}
        for i, key, encoded in chosen:
            value = events[i].data[key]
            data = encoded if encoded is not None else dumps(value)
            digest = hashlib.sha256(data).hexdigest()
            puts[digest] = data
            ref: dict[str, Any] = {REF: digest, "bytes": len(data)}
            if named is not None:
                ref[INCARNATION] = named
            out.setdefault(i, dict(events[i].data))[key] = ref
            self._cache.put((run_id, digest), _frozen(value, data), len(data))
        await asyncio.gather(
            *(self.store.put(run_id, d, b, incarnation=named) for d, b in puts.items())
        )
        return [replace(new, data=out[i]) if i in out else new for i, new in enumerate(events)]

    def _choose(self, events: Sequence[NewEvent]) -> list[tuple[int, str, bytes | None]]:
        """(event index, key) of the payloads to stow: each over the threshold or shaped like a
        reference, then the largest others while the batch's payloads add up to more than
        twice the threshold (one NATS message holds the whole batch)."""
        chosen: list[tuple[int, str, bytes | None]] = []
        rest: list[tuple[int, int, str, bytes | None]] = []
        for i, new in enumerate(events):
            for key in PAYLOAD_KEYS:
                if key not in new.data:
                    continue
                value = new.data[key]
                size, data = _measure(value, self.threshold)
                if size > self.threshold or is_ref(value):
                    chosen.append((i, key, data))
                elif size > _SMALL:
                    rest.append((size, i, key, data))
        total = sum(r[0] for r in rest)
        for size, i, key, data in sorted(rest, key=lambda r: -r[0]):
            if total <= 2 * self.threshold:
                break
            chosen.append((i, key, data))
            total -= size
        return chosen

    async def put_blob(self, run_id: str, data: bytes, incarnation: str | None = None) -> BlobRef:
        """The ``Blobs`` port's put: ``data`` under its digest, for the run's
        ``incarnation`` (None: named by run and digest alone)."""
        digest = digest_of(data)
        await self.store.put(run_id, digest, data, incarnation=incarnation)
        return BlobRef(digest, len(data), incarnation)

    async def get_blob(self, run_id: str, ref: BlobRef) -> bytes | None:
        return await self.store.get(run_id, ref.digest, incarnation=ref.incarnation)

    # reading -------------------------------------------------------------------------------
    async def resolve(self, run_id: str, events: list[Event]) -> list[Event]:
        """``events`` with every reference replaced by its value."""
        if not any(is_ref(ev.data.get(k)) for ev in events for k in PAYLOAD_KEYS):
            return events
        out: list[Event] = []
        for ev in events:
            if not any(is_ref(ev.data.get(k)) for k in PAYLOAD_KEYS):
                out.append(ev)
                continue
            data = dict(ev.data)
            for key in PAYLOAD_KEYS:
                if is_ref(data.get(key)):
                    data[key] = await self._value(run_id, ev.seq, data[key])
            out.append(replace(ev, data=data))
        return out

    async def resolve_info(self, info: RunInfo | None) -> RunInfo | None:
        """A run view whose input or output is a reference, with the value instead (a view's
        ``last_seq`` names the event of the run's output; the input's is the first)."""
        if info is None or not (is_ref(info.input) or is_ref(info.output)):
            return info
        changes: dict[str, Any] = {}
        if is_ref(info.input):
            changes["input"] = await self._value(info.run_id, 1, info.input)
        if is_ref(info.output):
            changes["output"] = await self._value(info.run_id, info.last_seq, info.output)
        return replace(info, **changes)

    async def _value(self, run_id: str, seq: int, ref: Mapping[str, Any]) -> Any:
        digest = ref.get(REF)
        try:
            named = incarnation_of(ref)
        except ValueError:
            named, digest = None, None
        if not isinstance(digest, str) or len(digest) != 64:
            raise BlobMissingError(run_id, seq, "a malformed reference", store=self.store.name)
        # keyed without the incarnation: a digest names the same bytes in every incarnation
        cached = self._cache.get((run_id, digest))
        if cached is not None:
            return _thawed(cached[0])
        data = await self.store.get(run_id, digest, incarnation=named)
        if data is None:
            raise BlobMissingError(run_id, seq, f"no blob {digest}", store=self.store.name)
        if hashlib.sha256(data).hexdigest() != digest:
            raise BlobMissingError(
                run_id, seq, f"blob {digest} holds other bytes", store=self.store.name
            )
        try:
            value = loads(data)
        except Unreadable as err:
            why = f"blob {digest}: {err}"
            raise BlobMissingError(run_id, seq, why, store=self.store.name) from None
        self._cache.put((run_id, digest), _frozen(value, data), len(data))
        return value
