"""Payloads sent before the wait on JetStream: a KV entry per ``(namespace, token)`` in the
``<prefix>_hookbuf`` bucket, holding the entry's JSON (``wayline.world.hook_buffer``).

Every change is a compare-and-set: create when the key is absent, else update on the revision
read, and read again when another writer came first. So a take is atomic: of two racing
takers, the second's update is refused and its next read finds the entry taken. Anyone with
publish rights can write into the bucket: a value that is not an entry is passed over with a
log line, and the next store for its key replaces it.

The bucket keeps an entry at most ``MAX_BUFFER_SECONDS`` after its last write (the bucket's
``max_age``): the server drops what a sweep never reached.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from ...errors import WorldUnavailableError
from ...world.hook_buffer import (
    MAX_BUFFER_SECONDS,
    BufferedPayload,
    HookBuffer,
    read_entry,
    to_store,
    to_take,
)
from .buckets import BucketOnFirstUse
from .codec import wrap
from .direct import kv_read
from .names import kv_key

_ATTEMPTS = 20
"""Compare-and-set rounds before a change gives up as contended (as for concurrency slots)."""

_Change = Callable[[BufferedPayload | None], tuple[BufferedPayload | None, Any]]


def _key(namespace: str, token: str) -> str:
    return kv_key(json.dumps([namespace, token]))


class NatsHookBuffer(BucketOnFirstUse, HookBuffer):
    suffix = "hookbuf"
    ttl = MAX_BUFFER_SECONDS

    async def _read(self, key: str, where: str) -> tuple[BufferedPayload | None, int | None]:
        """The entry under ``key`` and its revision (None: absent or deleted)."""
        await self._bucket()
        found = await kv_read(
            self._js, self.bucket, key, url=self._url, what=f"reading buffered payload {where}"
        )
        if found is None:
            return None, None
        if not found.data or found.headers.get("KV-Operation") in ("DEL", "PURGE"):
            return None, found.seq
        return read_entry(found.data, where), found.seq

    async def _change(self, namespace: str, token: str, change: _Change) -> Any:
        import nats.js.errors

        kv, key, where = await self._bucket(), _key(namespace, token), f"{namespace!r}/{token!r}"
        for _ in range(_ATTEMPTS):
            existing, revision = await self._read(key, where)
            new, result = change(existing)
            if new is None:
                return result
            value = json.dumps(new.to_json()).encode()
            try:
                await kv.update(key, value, last=revision or 0)  # 0: over no entry
            except (nats.js.errors.KeyWrongLastSequenceError, nats.js.errors.BadRequestError):
                continue  # another writer changed the entry first: read it again
            except Exception as err:
                raise wrap(self._url, f"writing buffered payload {where}", err) from err
            return result
        raise WorldUnavailableError(f"NATS at {self._url}: buffered payload {where} is contended")

    async def store(self, entry: BufferedPayload) -> BufferedPayload:
        def change(existing: BufferedPayload | None) -> tuple[BufferedPayload | None, Any]:
            if to_store(existing, entry, self._now()):
                return entry, entry
            return None, existing

        stored: BufferedPayload = await self._change(entry.namespace, entry.token, change)
        return stored

    async def get(self, namespace: str, token: str) -> BufferedPayload | None:
        entry, _ = await self._read(_key(namespace, token), f"{namespace!r}/{token!r}")
        return entry

    async def take(self, namespace: str, token: str, run_id: str) -> BufferedPayload | None:
        def change(existing: BufferedPayload | None) -> tuple[BufferedPayload | None, Any]:
            taken = to_take(existing, run_id, self._now())
            return taken, taken

        taken: BufferedPayload | None = await self._change(namespace, token, change)
        return taken

    async def give_back(self, entry: BufferedPayload) -> None:
        def change(existing: BufferedPayload | None) -> tuple[BufferedPayload | None, Any]:
            return (replace(entry, taken_by=None) if existing == entry else None), None

        await self._change(entry.namespace, entry.token, change)

    async def sweep(self) -> int:
        """Delete every expired entry (one read per key: a sweep is for maintenance, never on
        the path of a resume or a hook)."""
        import nats.js.errors

        kv, now, swept = await self._bucket(), self._now(), 0
        try:
            keys = await kv.keys()
        except nats.js.errors.NoKeysError:
            return 0
        except Exception as err:
            raise wrap(self._url, f"listing bucket {self.bucket}", err) from err
        for key in keys:
            entry, revision = await self._read(key, key)
            if entry is None or revision is None or not entry.expired(now):
                continue
            try:
                await kv.delete(key, last=revision)
            except (nats.js.errors.KeyWrongLastSequenceError, nats.js.errors.BadRequestError):
                continue  # stored again meanwhile
            except Exception as err:
                raise wrap(self._url, f"sweeping bucket {self.bucket}", err) from err
            swept += 1
        return swept
