"""Out-of-line payloads on JetStream: the Object Store bucket ``<prefix>_blobs`` (see
``wayline.world.blobs``).

An object is named ``<run subject token>/<sha256>``: a write that finds its name stored already
is skipped (a retried append re-uses the blob, never replaces it under a reader), and a run's
cleanup deletes the objects named by its token (one listing per cleanup pass, so a blob whose
append never landed goes too). Archive keeps a run's objects: the archived events name them.

Reads take the object's chunks with batch direct gets (``direct.read_subject``), bounded by the
request timeout per batch, instead of nats-py's consumer-based ``get``, which waits forever on
chunks that are gone and concatenates bytes quadratically.
"""

from __future__ import annotations

import logging
from typing import Any

from .codec import wrap
from .direct import read_subject
from .names import Names, subject_token

log = logging.getLogger("wayline.worlds.nats")

CHUNK = 256 * 1024
"""Bytes per stored chunk: well under the server's default 1 MiB ``max_payload``."""
_BATCH = 16
"""Chunks per direct get (4 MiB a reply)."""


def blob_name(run_id: str, digest: str) -> str:
    return f"{subject_token(run_id)}/{digest}"


class NatsBlobs:
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
        self._nc, self._js = nc, js
        self.bucket = f"{names.prefix}_blobs"
        self.name = f"object store {self.bucket}"
        self._replicas, self._memory = replicas, memory
        self._url, self._timeout = url, timeout
        self._obs: Any = None

    async def _store(self, create: bool) -> Any:
        import nats.js.errors
        from nats.js.api import ObjectStoreConfig, StorageType

        if self._obs is not None:
            return self._obs
        try:
            self._obs = await self._js.object_store(self.bucket)
        except nats.js.errors.BucketNotFoundError:
            if not create:
                return None
            config = ObjectStoreConfig(
                description="Wayline out-of-line payloads: <run>/<sha256>",
                storage=StorageType.MEMORY if self._memory else StorageType.FILE,
                replicas=self._replicas,
            )
            self._obs = await self._js.create_object_store(self.bucket, config=config)
        return self._obs

    async def _info(self, obs: Any, name: str) -> Any:
        import nats.js.errors

        try:
            info = await obs.get_info(name)
        except nats.js.errors.ObjectNotFoundError:
            return None
        return None if info.deleted else info

    async def put(self, run_id: str, digest: str, data: bytes) -> None:
        from nats.js.api import ObjectMeta, ObjectMetaOptions

        name = blob_name(run_id, digest)
        try:
            obs = await self._store(create=True)
            info = await self._info(obs, name)
            if info is not None and info.size == len(data):
                return
            meta = ObjectMeta(name=name, options=ObjectMetaOptions(max_chunk_size=CHUNK))
            await obs.put(name, data, meta=meta)
        except Exception as err:
            raise wrap(self._url, f"storing a payload of run {run_id}", err) from err

    async def get(self, run_id: str, digest: str) -> bytes | None:
        name = blob_name(run_id, digest)
        try:
            obs = await self._store(create=False)
            info = None if obs is None else await self._info(obs, name)
            if info is None or not info.nuid:
                return None
            msgs = await read_subject(
                self._nc,
                f"OBJ_{self.bucket}",
                f"$O.{self.bucket}.C.{info.nuid}",
                0,
                timeout=self._timeout,
                url=self._url,
                batch=_BATCH,
            )
        except Exception as err:
            raise wrap(self._url, f"reading a payload of run {run_id}", err) from err
        if len(msgs) != info.chunks:
            return None
        return b"".join(m.data for m in msgs)

    async def names(self) -> list[str]:
        """Every stored object's name (one listing, for a cleanup pass)."""
        import nats.js.errors

        try:
            obs = await self._store(create=False)
            if obs is None:
                return []
            return [i.name for i in await obs.list(ignore_deletes=True) if not i.deleted]
        except nats.js.errors.NotFoundError:
            return []  # an empty bucket
        except Exception as err:
            raise wrap(self._url, "listing stored payloads", err) from err

    async def drop(self, run_id: str, names: list[str]) -> None:
        """Delete the run's objects among ``names``."""
        import nats.js.errors

        prefix = subject_token(run_id) + "/"
        obs = await self._store(create=False)
        for name in names:
            if not name.startswith(prefix):
                continue
            try:
                await obs.delete(name)
            except nats.js.errors.ObjectNotFoundError:
                pass  # deleted by a cleanup running beside this one
            except Exception as err:
                raise wrap(self._url, f"deleting the payloads of run {run_id}", err) from err
