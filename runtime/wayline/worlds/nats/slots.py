"""Concurrency slots on JetStream: a KV entry per limit key, ``{"holders": [run ids]}``,
changed only by compare-and-set (create when absent, update on the revision read), so two
workers racing for the last slot cannot both win. A holder whose run has ended (by its log) or
is gone is dropped by whoever next looks at the key."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

from ...errors import WorldUnavailableError
from ...world import RunInfo
from .codec import wrap
from .names import Names, kv_key

_ATTEMPTS = 20


class Slots:
    def __init__(
        self,
        js: Any,
        names: Names,
        get_run: Callable[[str], Awaitable[RunInfo | None]],
        *,
        replicas: int,
        memory: bool,
        url: str,
    ) -> None:
        self._js, self._names, self._get_run = js, names, get_run
        self._replicas, self._memory, self._url = replicas, memory, url
        self._kv: Any = None

    @property
    def bucket(self) -> str:
        return f"{self._names.prefix}_slots"

    async def _bucket(self) -> Any:
        if self._kv is None:
            from nats.js.api import KeyValueConfig, StorageType

            store = StorageType.MEMORY if self._memory else StorageType.FILE
            try:
                self._kv = await self._js.create_key_value(
                    KeyValueConfig(
                        bucket=self.bucket,
                        history=1,
                        storage=store,
                        replicas=self._replicas,
                        direct=True,
                    )
                )
            except Exception as err:
                raise wrap(self._url, f"creating bucket {self.bucket}", err) from err
        return self._kv

    async def acquire(self, key: str, run_id: str, limit: int) -> tuple[bool, list[str]]:
        import nats.js.errors

        kv = await self._bucket()
        name = kv_key(key)
        for _ in range(_ATTEMPTS):
            try:
                entry = await kv.get(name)
            except nats.js.errors.KeyNotFoundError:
                entry = None
            except Exception as err:
                raise wrap(self._url, f"reading concurrency slot {key!r}", err) from err
            held: list[str] = []
            if entry is not None and entry.value:
                held = list(json.loads(entry.value).get("holders") or [])
            live = [h for h in held if h == run_id or await self._live(h)]
            if run_id in live and live == held:
                return True, live
            won = run_id in live or len(live) < limit
            after = live + ([run_id] if won and run_id not in live else [])
            if after == held:
                return won, after
            value = json.dumps({"key": key, "holders": after}).encode()
            try:
                if entry is None:
                    await kv.create(name, value)
                else:
                    await kv.update(name, value, last=entry.revision)
            except (nats.js.errors.KeyWrongLastSequenceError, nats.js.errors.BadRequestError):
                continue  # another worker changed the slots first: look again
            except Exception as err:
                raise wrap(self._url, f"taking concurrency slot {key!r}", err) from err
            return won, after
        raise WorldUnavailableError(f"NATS at {self._url}: concurrency slot {key!r} is contended")

    async def _live(self, run_id: str) -> bool:
        info = await self._get_run(run_id)
        return info is not None and not info.status.terminal
