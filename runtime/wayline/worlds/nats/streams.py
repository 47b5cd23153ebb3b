"""Step streams on JetStream: one subject per run and stream, ``<prefix>.st.<run>.<stream>``,
in a stream of their own (limits retention; purged with the run by cleanup and archive).

One step attempt writes a stream at a time, publishing each record and awaiting its ack, so
the subject's order is the write order. Readers page through the subject with batch direct
gets; a record's index is its position in the subject.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from ...world import entries
from .codec import wrap
from .direct import direct_batch
from .names import Names, subject_token
from .provision import _ensure_stream


def stream_name(names: Names) -> str:
    return f"{names.prefix}_streams"


def run_filter(names: Names, run_id: str) -> str:
    return f"{names.prefix}.st.{subject_token(run_id)}.*"


def subject(names: Names, run_id: str, stream: str) -> str:
    return f"{names.prefix}.st.{subject_token(run_id)}.{subject_token(stream)}"


class Streams:
    def __init__(
        self,
        nc: Any,
        js: Any,
        names: Names,
        *,
        replicas: int,
        memory: bool,
        url: str,
        timeout: float,
    ) -> None:
        self._nc, self._js, self._names = nc, js, names
        self._replicas, self._memory = replicas, memory
        self._url, self._timeout = url, timeout
        self._ready = False

    async def _ensure(self) -> None:
        if self._ready:
            return
        from nats.js.api import DiscardPolicy, RetentionPolicy, StorageType, StreamConfig

        await _ensure_stream(
            self._js,
            StreamConfig(
                name=stream_name(self._names),
                description="Wayline step streams: one subject per run and stream",
                subjects=[f"{self._names.prefix}.st.>"],
                retention=RetentionPolicy.LIMITS,
                storage=StorageType.MEMORY if self._memory else StorageType.FILE,
                num_replicas=self._replicas,
                discard=DiscardPolicy.OLD,
                allow_direct=True,
            ),
            self._url,
        )
        self._ready = True

    async def write(self, run_id: str, stream: str, records: Sequence[Mapping[str, Any]]) -> None:
        await self._ensure()
        subj = subject(self._names, run_id, stream)
        for record in records:
            try:
                await self._js.publish(
                    subj, json.dumps(dict(record)).encode(), timeout=self._timeout
                )
            except Exception as err:
                raise wrap(self._url, f"writing stream {stream!r} of {run_id}", err) from err

    async def read(self, run_id: str, stream: str, start: int, limit: int) -> list[dict[str, Any]]:
        await self._ensure()
        subj = subject(self._names, run_id, stream)
        out: list[dict[str, Any]] = []
        index, seq = 0, 1
        want = max(1, limit)
        while len(out) < want:
            request = {"seq": seq, "next_by_subj": subj, "batch": 256}
            msgs, pending = await direct_batch(
                self._nc, stream_name(self._names), request, timeout=self._timeout, url=self._url
            )
            for msg in msgs:
                seq = msg.seq + 1
                record = _record(msg.data)
                if record is None:
                    continue  # not a record a step wrote (anyone can publish here): no index
                if index >= start and len(out) < want:
                    out.append(record)
                index += 1
            if not msgs or pending == 0:
                break
        return out

    async def purge_run(self, run_id: str) -> None:
        await self._ensure()
        try:
            await self._js.purge_stream(
                stream_name(self._names), subject=run_filter(self._names, run_id)
            )
        except Exception as err:
            raise wrap(self._url, f"deleting the streams of {run_id}", err) from err


def _record(data: bytes) -> dict[str, Any] | None:
    """A stored stream record (a JSON object, what ``write_stream`` stores), or None for
    bytes that are not one. What a record says is the reader's to check (``_sdk.streams``)."""
    try:
        return entries.loads_object(data)
    except entries.Unreadable:
        return None
