"""The JetStream world's search attribute index: one empty message per (attribute value, run)
on ``<prefix>.at.<key>.<value>.<run>`` in the ``<prefix>_attrs`` stream, so the runs that
hold a value are the subjects under ``<prefix>.at.<key>.<value>.*`` (one stream-info request
names them, with no message read) and the runs that hold a key at all are those under
``<prefix>.at.<key>.*.*``.

It is kept a superset of the log (docs/nats.md, "Search attributes"): an append that sets
values publishes their entries first, then appends, then publishes them again. A writer that
dies between the two leaves an entry for a value that may never have been set: every
candidate is checked against its run's log before it is answered, so such an entry, or one
for a value a later append changed, is never an answer; it is purged when a query meets it
and its last publish is older than :data:`STALE_AFTER`. The second publish renews it, so a
writer stalled between its first publish and its append cannot lose its entry to that purge
unless it also dies right after the append.
"""

from __future__ import annotations

import asyncio
import base64
import json
import math
from collections.abc import Iterable, Mapping
from typing import Any

from ..._core import search_attributes
from ..._core.events import EventType
from ..._core.search_attributes import IndexRow, Kind, Where
from ...errors import WorldError, WorldUnavailableError
from .codec import parse_stamp, wrap
from .direct import direct_batch
from .names import Names, subject_token, token_value

STALE_AFTER = 600.0
"""Seconds after its last publish an entry whose run does not hold its value is purged by a
query that meets it: far longer than an append takes (a few request timeouts), so the entry
of an append still under way is never taken for stale."""

_KIND_LETTER: dict[Kind, str] = {"str": "s", "num": "n", "bool": "b", "time": "t"}
_LETTER_KIND: dict[str, Kind] = {v: k for k, v in _KIND_LETTER.items()}
_MULTI_LAST = 500
"""Subjects per multi_last direct get (the server answers 413 past 1024 matches)."""


def stream_name(names: Names) -> str:
    return f"{names.prefix}_attrs"


def wildcard(names: Names) -> str:
    return f"{names.prefix}.at.>"


def _b64(text: str) -> str:
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


def value_token(row: IndexRow) -> str:
    """A subject token naming one index row: its kind's letter and its value, base64url."""
    kind, num, text = row
    shown = text if kind == "str" else repr(num)
    return _KIND_LETTER[kind] + _b64(shown or "")


def row_of(token: str) -> IndexRow | None:
    """The index row a value token names; None for a token no writer of this version made."""
    kind = _LETTER_KIND.get(token[:1])
    if kind is None:
        return None
    try:
        body = token[1:]
        shown = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)).decode()
        if kind == "str":
            return (kind, None, shown)
        number = float(shown)
    except (ValueError, UnicodeDecodeError):
        return None
    return (kind, number, None) if math.isfinite(number) else None


def entry_subjects(names: Names, run_id: str, values: Mapping[str, Any]) -> list[str]:
    run = subject_token(run_id)
    return [
        f"{names.prefix}.at.{key}.{value_token(row)}.{run}"
        for key, value in values.items()
        if value is not None
        for row in search_attributes.index_rows(value)
    ]


def values_set(events: Iterable[Any]) -> dict[str, Any]:
    """The values an append sets (its ``run_created``'s and its ``attributes_set``s')."""
    out: dict[str, Any] = {}
    for new in events:
        if new.type is EventType.RUN_CREATED:
            out.update(search_attributes.stored(new.data))
        elif new.type is EventType.ATTRIBUTES_SET:
            update = new.data.get("set")
            if isinstance(update, Mapping):
                out.update({k: v for k, v in update.items() if v is not None})
    return out


class AttributeIndex:
    def __init__(self, nc: Any, js: Any, names: Names, *, url: str, timeout: float) -> None:
        self._nc, self._js, self._names = nc, js, names
        self._url, self._timeout = url, timeout
        self._stream = stream_name(names)

    async def write(self, run_id: str, values: Mapping[str, Any]) -> None:
        """Publish (or renew) the entries of ``values`` for ``run_id``."""
        subjects = entry_subjects(self._names, run_id, values)
        try:
            await asyncio.gather(*(self._js.publish(s, b"", stream=self._stream) for s in subjects))
        except Exception as err:
            raise wrap(self._url, "writing the search attribute index", err) from err

    async def forget_run(self, run_id: str) -> None:
        """Purge every entry of a run that was deleted or archived."""
        subject = f"{self._names.prefix}.at.*.*.{subject_token(run_id)}"
        try:
            await self._js.purge_stream(self._stream, subject=subject)
        except Exception as err:
            raise wrap(self._url, "purging the search attribute index", err) from err

    async def candidates(self, where: Where) -> dict[str, list[tuple[str, IndexRow]]]:
        """The runs the index names for ``where``: each with the entries that named it."""
        prefix = f"{self._names.prefix}.at.{where.key}"
        exact = where.op == "="
        if exact:
            row: IndexRow = (where.kind, where.num, where.text)
            pattern = f"{prefix}.{value_token(row)}.*"
        else:
            pattern = f"{prefix}.*.*"
        out: dict[str, list[tuple[str, IndexRow]]] = {}
        for subject in await self._subjects(pattern):
            parts = subject.rsplit(".", 2)
            if len(parts) != 3:
                continue
            found = row_of(parts[1])
            run_id = token_value(parts[2])
            if found is None or run_id is None:
                continue
            if where.op == "!=" or where.holds(found):
                out.setdefault(run_id, []).append((subject, found))
        return out

    async def _subjects(self, pattern: str) -> list[str]:
        """Every subject of the index under ``pattern``, from the stream's (paged) state."""
        subjects: list[str] = []
        while True:
            request = {"subjects_filter": pattern, "offset": len(subjects)}
            try:
                resp = await self._nc.request(
                    f"$JS.API.STREAM.INFO.{self._stream}",
                    json.dumps(request).encode(),
                    timeout=self._timeout,
                )
            except Exception as err:
                raise wrap(self._url, "reading the search attribute index", err) from err
            info = json.loads(resp.data)
            if "error" in info:
                error = info["error"]
                unavailable = isinstance(error, dict) and error.get("code") == 503
                kind = WorldUnavailableError if unavailable else WorldError
                raise kind(f"NATS at {self._url}: search attribute index: {error}")
            page = list((info.get("state") or {}).get("subjects") or {})
            subjects.extend(page)
            if not page or len(subjects) >= int(info.get("total") or 0):
                return subjects

    async def repair(self, stale: list[str], now: float) -> int:
        """Purge the entries of ``stale`` (entries whose run does not hold their value) that
        were last published more than :data:`STALE_AFTER` ago. Returns how many."""
        purged = 0
        for start in range(0, len(stale), _MULTI_LAST):
            chunk = stale[start : start + _MULTI_LAST]
            msgs, _ = await direct_batch(
                self._nc,
                self._stream,
                {"multi_last": chunk, "batch": len(chunk)},
                timeout=self._timeout,
                url=self._url,
            )
            for msg in msgs:
                try:
                    at = parse_stamp(str(msg.headers.get("Nats-Time-Stamp", "")))
                except ValueError:
                    continue
                if now - at > STALE_AFTER:
                    try:
                        await self._js.purge_stream(self._stream, subject=msg.subject)
                    except Exception as err:
                        raise wrap(self._url, "repairing the search attribute index", err) from err
                    purged += 1
        return purged
