"""The workers' registry of a NATS world: a KV bucket, an entry a served key, merged as every
world merges them (``wayline.world.registry``) with a compare-and-set on the key's revision. A
heartbeat's write is also a sample of the server's clock (``skew.py``)."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..._core import clock
from ...errors import WorldError, WorldUnavailableError
from ...world import entries
from ...world.registry import merge_served, readable
from .buckets import kv_bucket
from .codec import parse_stamp, wrap
from .connection import Link
from .direct import connected, kv_read, kv_value, last_by_subject
from .names import Names, kv_key
from .skew import Skew

log = logging.getLogger("wayline.worlds.nats")


class NatsRegistry:
    def __init__(
        self,
        link: Link,
        jetstream: Callable[[], Any],
        names: Names,
        skew: Skew,
        now: Callable[[], float],
    ) -> None:
        self._nc = link.nc
        self._js = link.js
        self._jetstream = jetstream
        """The started world's JetStream context, or its not-started error."""
        self._names = names
        self._skew = skew
        self._now = now
        self._url = link.url
        self._servers_shown = link.shown
        self._timeout = link.timeout
        self._kv: Any = None

    def close(self) -> None:
        self._kv = None

    async def record_served(self, entries: Sequence[Mapping[str, Any]]) -> None:
        kv = await self.served()
        for i, e in enumerate(entries):
            try:
                await self._merge_served(kv, kv_key(str(e["key"])), e, sample=i == 0)
            except WorldError:
                raise
            except Exception as err:
                raise wrap(self._servers_shown, "recording a worker heartbeat", err) from err

    async def _merge_served(
        self, kv: Any, key: str, entry: Mapping[str, Any], *, sample: bool = False
    ) -> None:
        """Merge ``entry`` into the stored one, compare-and-set on the key's revision (two
        workers of one definition heartbeat into the same key; neither loses the other).
        With ``sample``, the write's server stamp is also a sample of the server's clock
        (``skew.py``): a worker starts with one before it takes a delivery, and one every
        heartbeat keeps it current when the worker appends nothing."""
        import nats.js.errors

        while True:
            js, bucket = self._js(), self._names.served_bucket
            if js is None:  # closed meanwhile
                raise WorldUnavailableError(f"world {self._url} is not started (use `async with`)")
            what = "recording a worker heartbeat"
            found = await kv_read(js, bucket, key, url=self._servers_shown, what=what)
            last, value = kv_value(found)
            stored: Any = None
            if value:
                try:
                    stored = entries.loads(value)
                except entries.Unreadable:
                    stored = None
            merged = merge_served(stored if isinstance(stored, dict) else None, entry, self._now())
            if merged is None:
                return
            data = json.dumps(merged).encode()
            try:
                sent = clock.now()
                revision = await kv.update(key, data, last=last)  # 0: over no entry
                acked = clock.now()
            except nats.js.errors.KeyWrongLastSequenceError:
                continue  # another worker wrote it meanwhile: merge into its entry
            if sample:
                await self._sample_clock(sent, acked, revision)
            return

    async def _sample_clock(self, sent: float, acked: float, revision: int) -> None:
        bucket = self._names.served_bucket
        try:
            raw = await self._jetstream().get_msg(f"KV_{bucket}", revision, direct=True)
            stamp = parse_stamp((raw.headers or {}).get("Nats-Time-Stamp", ""))
        except Exception as err:  # a sample is only a hint: the next one will do
            log.debug("no clock sample from the worker registry: %s", err)
            return
        self._skew.sample(sent, acked, stamp)

    async def list_served(self) -> list[dict[str, Any]]:
        """Every registry entry (``direct.last_by_subject``: the KV client's key listing missed
        a key written while it listed, and a live worker's heartbeat made it look gone). Bytes
        that are not an entry (anyone can write into the bucket) are passed over."""
        await self.served()  # the bucket exists (or the usual error)
        nc, bucket = self._nc(), self._names.served_bucket
        if nc is None:  # closed meanwhile
            raise WorldUnavailableError(f"world {self._url} is not started (use `async with`)")
        try:
            await connected(nc, timeout=self._timeout, url=self._servers_shown)
            last = await last_by_subject(
                nc,
                f"KV_{bucket}",
                f"$KV.{bucket}.>",
                timeout=self._timeout,
                url=self._servers_shown,
            )
        except WorldError:
            raise  # a wayline error passes as it is, as record_served's (``direct.kv_read``)
        except Exception as err:
            raise wrap(self._servers_shown, "listing worker heartbeats", err) from err
        out: list[dict[str, Any]] = []
        for m in last:
            if m.headers.get("KV-Operation") in ("DEL", "PURGE") or not m.data:
                continue
            try:
                entry = readable(entries.loads(m.data))
            except entries.Unreadable:
                continue
            if entry is not None:
                out.append(entry)
        return out

    async def served(self) -> Any:
        if self._kv is None:
            if self._js() is None:
                raise WorldUnavailableError(f"world {self._url} is not started (use `async with`)")
            self._kv = await kv_bucket(
                self._js(), self._names.served_bucket, url=self._servers_shown
            )
        return self._kv
