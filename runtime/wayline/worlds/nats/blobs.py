"""Out-of-line payloads on JetStream: the Object Store bucket ``<prefix>_blobs`` (see
``wayline.world.blobs``).

An object is named ``<run subject token>/<incarnation>/<sha256>``: a write that finds its name
stored already writes no chunks (a retried append re-uses the blob, never replaces it under a
reader); it writes the object's meta again, as it is, so the orphan grace counts from the
latest put.
The incarnation is the ``Nats-Msg-Id`` of the run's first message (its ``run_created``), so a
run id started again once its log was archived (whose objects stay: the archived events name
them) or deleted stores its objects under a name of its own. An object named
``<run token>/<sha256>`` was written before incarnations were named (both incarnations of a
reused id may name it): it is read as before.

Each object is also stored under that older name (``legacy``): a process of the version before
incarnations (during a rolling update, or after a rollback) ignores a reference's incarnation
and reads the older name. This dual write stays until no version before incarnations needs to
read the bucket (``docs/durability.md``); it costs a second copy of each out-of-line payload
(one per run id and digest, shared by the id's incarnations).

A run's cleanup (:meth:`NatsBlobs.drop`, one listing per cleanup pass) deletes the objects of
its own incarnation, and the id's other objects but those another run may still need: those
the archive's copies of the id name (by incarnation, or by digest for an older name) and those
stored after the run ended (a start of the same id under way, which lands once the ended run
is purged). So a blob whose append never landed (its ``run_created`` lost the race for the id,
or was retried under another message id) goes too. A blob of an id that has no log at all (its
start's process died between the blob and the append, or the append was refused) is deleted
by the cleanup pass once it is older than the world's grace for orphans
(``wayline.world.blobs.ORPHAN_GRACE_SECONDS``), unless the archive names it.

Two writers may put the same blob at once (parallel steps returning one large value). nats-py's
``put`` would let the second replace the first and purge its chunks under a reader, so a put
here writes its chunks under a fresh nuid, then the object's meta message only if the meta
subject is still as it saw it (``Nats-Expected-Last-Subject-Sequence``): the writer that loses
the race removes its own chunks, never the winner's. A reader that still finds fewer chunks than
the meta names (an object deleted or replaced under it) reads the meta again before saying the
blob is gone.

Reads take the object's chunks with batch direct gets (``direct.read_subject``), bounded by the
request timeout per batch, instead of nats-py's consumer-based ``get``, which waits forever on
chunks that are gone and concatenates bytes quadratically.
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import math
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from ...errors import WorldError, WorldUnavailableError
from ...world import entries
from .codec import is_wrong_last_sequence, parse_stamp, wrap
from .direct import direct_batch, last_by_subject, read_subject
from .names import Names, subject_token

log = logging.getLogger("wayline.worlds.nats")

CHUNK = 256 * 1024
"""Bytes per stored chunk: well under the server's default 1 MiB ``max_payload``."""
_BATCH = 16
"""Chunks per direct get (4 MiB a reply)."""
_TRIES = 4
"""Reads of an object's meta before a put gives up on a contended name, or a get on chunks
that changed under it."""


@dataclass(frozen=True)
class Archived:
    """What the archive's copies of a run id name (``Retention.archived``)."""

    digests: frozenset[str]
    """Every reference's digest: the older name a previous version reads any of them by."""
    incarnations: frozenset[str]

    def names(self, name: str) -> bool:
        """Whether one of the id's object names is one these copies name."""
        parts = name.split("/")
        if len(parts) == 2:
            return parts[1] in self.digests
        return len(parts) != 3 or parts[1] in self.incarnations  # not a name a put writes


def blob_name(run_id: str, digest: str, incarnation: str | None = None) -> str:
    if incarnation is None:  # written before incarnations were named
        return f"{subject_token(run_id)}/{digest}"
    return f"{subject_token(run_id)}/{incarnation}/{digest}"


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
        self._claims: dict[str, set[str]] = {}
        """By nuid: the names whose meta named it, in the last listing (:meth:`names`)."""
        self._stamps: dict[str, float] = {}
        """By name: when the server stored its meta, in the last listing (:meth:`names`)."""
        self._listed: dict[str, int] = {}
        """By name: the stream sequence of its meta, in the last listing (:meth:`names`)."""

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
                description="Wayline out-of-line payloads: <run>/<incarnation>/<sha256>",
                storage=StorageType.MEMORY if self._memory else StorageType.FILE,
                replicas=self._replicas,
            )
            self._obs = await self._js.create_object_store(self.bucket, config=config)
        return self._obs

    def _meta_subject(self, name: str) -> str:
        return f"$O.{self.bucket}.M.{base64.urlsafe_b64encode(name.encode()).decode()}"

    async def _meta(self, name: str) -> tuple[int, Any]:
        """The stream sequence of the object's last meta message (0 when it has none) and
        the object's info (None when there is none, it is deleted, or the message is not an
        object's meta: anyone can write here, and such bytes hold no object; a put writes
        over them, a get finds the blob missing)."""
        import nats.js.errors
        from nats.js.api import ObjectInfo

        try:
            msg = await self._js.get_last_msg(f"OBJ_{self.bucket}", self._meta_subject(name))
        except nats.js.errors.NotFoundError:
            return 0, None
        try:
            info = ObjectInfo.from_response(entries.loads_object(msg.data))
        except (entries.Unreadable, TypeError, ValueError, KeyError, AttributeError):
            info = None
        if info is not None and info.deleted:
            return msg.seq, None
        if info is None or not _readable(info):
            log.warning("object %s: its meta message %d is not an object's", name, msg.seq)
            return msg.seq, None
        return msg.seq, info

    async def put(
        self, run_id: str, digest: str, data: bytes, *, incarnation: str | None = None
    ) -> None:
        named = [blob_name(run_id, digest, incarnation)]
        if incarnation is not None:  # the dual write (module docstring), after the new name
            named.append(blob_name(run_id, digest))
        try:
            await self._store(create=True)
            for name in named:
                if not await self._put_named(name, data):
                    break
            else:
                return
        except Exception as err:
            raise wrap(self._url, f"storing a payload of run {run_id}", err) from err
        raise WorldError(
            f"NATS at {self._url}: storing a payload of run {run_id} failed (its object "
            f"{name} changed under each of {_TRIES} writes)",
            url=self._url,
        )

    async def _put_named(self, name: str, data: bytes) -> bool:
        """Store the object ``name`` unless it is stored; False when it changed under each
        of :data:`_TRIES` writes."""
        for _ in range(_TRIES):
            seq, info = await self._meta(name)
            if info is not None and info.size == len(data):
                if await self._renew(name, seq, info):
                    return True
                # Another writer wrote the meta since it was read: its put or renewal is as
                # recent as this one would be. A deletion left no object: write it again.
                _, info = await self._meta(name)
                if info is not None and info.size == len(data):
                    return True
                continue
            if await self._put_over(name, data, seq, info):
                return True
        return False

    async def _renew(self, name: str, seq: int, info: Any) -> bool:
        """Write the stored object's meta again, as it is, so its time is now. A start retried
        with the same input puts the same blob again; orphan cleanup reads the meta's time,
        and the first put's time could let it delete the blob between the retry's put and its
        append. False when the meta subject moved past ``seq`` (another writer's meta)."""
        try:
            await self._js.publish(
                self._meta_subject(name),
                json.dumps(info.as_dict()).encode(),
                headers={"Nats-Rollup": "sub", "Nats-Expected-Last-Subject-Sequence": str(seq)},
            )
        except Exception as err:
            if is_wrong_last_sequence(err):
                return False
            raise
        return True

    async def _put_over(self, name: str, data: bytes, seq: int, old: Any) -> bool:
        """Write the object if its meta subject's last message is still ``seq`` (see the
        module docstring); False when another writer got there first. ``old`` is the object
        it replaces (a damaged one: a sound one is never replaced), whose chunks go."""
        from nats.js.api import ObjectInfo, ObjectMetaOptions

        stream, nuid = f"OBJ_{self.bucket}", uuid.uuid4().hex
        chunks = f"$O.{self.bucket}.C.{nuid}"
        sent = 0
        try:
            for start in range(0, len(data), CHUNK):
                await self._js.publish(chunks, data[start : start + CHUNK])
                sent += 1
            sha = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).decode()
            info = ObjectInfo(
                name=name,
                bucket=self.bucket,
                nuid=nuid,
                size=len(data),
                chunks=sent,
                digest=f"SHA-256={sha}",
                options=ObjectMetaOptions(max_chunk_size=CHUNK),
            )
            await self._js.publish(
                self._meta_subject(name),
                json.dumps(info.as_dict()).encode(),
                headers={"Nats-Rollup": "sub", "Nats-Expected-Last-Subject-Sequence": str(seq)},
            )
        except Exception as err:
            await self._js.purge_stream(stream, subject=chunks)
            if is_wrong_last_sequence(err):
                return False
            raise
        if old is not None and old.nuid:
            await self._js.purge_stream(stream, subject=f"$O.{self.bucket}.C.{old.nuid}")
        return True

    async def get(
        self, run_id: str, digest: str, *, incarnation: str | None = None
    ) -> bytes | None:
        name = blob_name(run_id, digest, incarnation)
        try:
            if await self._store(create=False) is None:
                return None
            for _ in range(_TRIES):
                _, info = await self._meta(name)
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
                if len(msgs) == info.chunks:
                    return b"".join(m.data for m in msgs)
        except Exception as err:
            raise wrap(self._url, f"reading a payload of run {run_id}", err) from err
        return None

    async def stream(
        self, run_id: str, digest: str, *, incarnation: str | None = None, batch: int = _BATCH
    ) -> AsyncIterator[bytes]:
        """The object's stored chunks in order, ``batch`` a request, so a reader holds one
        batch at a time rather than the whole object; nothing when it is not stored. A reader
        of the first KiB alone (the console's preview) asks for one: a batch is 4 MiB.
        Raises :class:`LookupError` once the chunks it read are fewer than the object names
        (deleted or replaced under the read) or do not hash to ``digest``: what was yielded
        then is not the blob, and the caller must not pass it off as whole."""
        name = blob_name(run_id, digest, incarnation)
        stream = f"OBJ_{self.bucket}"
        try:
            if await self._store(create=False) is None:
                return
            _, info = await self._meta(name)
        except Exception as err:
            raise wrap(self._url, f"reading a payload of run {run_id}", err) from err
        if info is None or not info.nuid:
            return
        subject, sha = f"$O.{self.bucket}.C.{info.nuid}", hashlib.sha256()
        seen, after = 0, 0
        while seen < info.chunks:
            request = {"seq": after + 1, "next_by_subj": subject, "batch": batch}
            try:
                msgs, _ = await direct_batch(
                    self._nc, stream, request, timeout=self._timeout, url=self._url
                )
            except Exception as err:
                raise wrap(self._url, f"reading a payload of run {run_id}", err) from err
            if not msgs:
                break
            for msg in msgs:
                sha.update(msg.data)
                yield msg.data
            seen, after = seen + len(msgs), msgs[-1].seq
        if seen != info.chunks or sha.hexdigest() != digest:
            raise LookupError(f"object {name} changed while it was read")

    async def names(self) -> list[str]:
        """Every stored object's name (one listing, for a cleanup pass; ``last_by_subject``).
        It also notes which names each chunk subject is claimed by, for :meth:`drop`."""
        import nats.js.errors

        try:
            obs = await self._store(create=False)
            if obs is None:
                return []
            where = (f"OBJ_{self.bucket}", f"$O.{self.bucket}.M.>")  # every object's meta
            metas = await last_by_subject(self._nc, *where, timeout=self._timeout, url=self._url)
        except nats.js.errors.NotFoundError:
            return []  # an empty bucket
        except WorldUnavailableError:
            raise
        except Exception as err:
            raise wrap(self._url, "listing stored payloads", err) from err
        names, self._claims, self._stamps, self._listed = [], {}, {}, {}
        for m in metas:  # what is not an object's meta (anyone can write here) is passed over
            try:
                meta = entries.loads(m.data)
            except entries.Unreadable:
                continue
            named = isinstance(meta, dict) and isinstance(meta.get("name"), str)
            if named and not meta.get("deleted"):
                names.append(meta["name"])
                self._stamps[meta["name"]] = _stamp(m.headers)
                self._listed[meta["name"]] = m.seq
                self._claims.setdefault(str(meta.get("nuid")), set()).add(meta["name"])
        return names

    async def drop(
        self,
        run_id: str,
        incarnation: str | None,
        ended: float,
        names: list[str],
        archived: Callable[[], Awaitable[Archived | None]],
    ) -> None:
        """Delete, among ``names``, the objects of the run's ``incarnation``, and the id's
        other objects that were stored by the time the run ``ended`` (server time) and that
        ``archived`` (what the archive's copies of the id name; None: the archive holds copies
        it cannot read, so those others are all kept) does not name. ``archived`` is asked
        only when there are such objects.

        Each object's chunks go, then its meta. Not nats-py's ``delete``, which purges whatever
        chunk subject the meta names: a meta written by hand naming ``>`` (or another object's
        nuid) would take every object's chunks (or that object's) with it. Chunks are purged
        only under a nuid a put writes and that no object kept (in the last listing) names."""
        token = subject_token(run_id)
        own = f"{token}/{incarnation}/" if incarnation is not None else None
        ids = [n for n in names if n.startswith(f"{token}/")]
        doomed = [n for n in ids if own is not None and n.startswith(own)]
        before = [n for n in ids if n not in doomed and self._stamps.get(n, math.inf) <= ended]
        if before:
            kept = await archived()
            if kept is not None:
                doomed += [n for n in before if not kept.names(n)]
        await self.purge(run_id, doomed)

    def stale(self, cutoff: float) -> dict[str, list[str]]:
        """By run subject token: the names of the last listing (:meth:`names`) stored by
        ``cutoff`` (server time)."""
        out: dict[str, list[str]] = {}
        for name, stamp in self._stamps.items():
            if stamp <= cutoff:
                out.setdefault(name.split("/", 1)[0], []).append(name)
        return out

    async def purge(self, run_id: str, doomed: list[str]) -> None:
        """Delete the objects ``doomed`` of the run id, each's meta then its chunks (see
        :meth:`drop`), as the last listing (:meth:`names`) saw them.

        An object was chosen by its meta's time in that listing, and a retried put of the
        same bytes renews that time (``_renew``) between the listing and here: its start's
        append will name it. So the meta is purged only up to the message listed (JetStream's
        purge up to a sequence: a renewal is a later message and stays), and the chunks only
        when no meta is left after that. A renewal that read the meta before the purge and
        writes after it expects the purged message as the subject's last, is refused, reads
        no object and puts it again, chunks and all."""
        stream = f"OBJ_{self.bucket}"
        going = set(doomed)
        try:
            for name in doomed:
                seq, info = await self._meta(name)
                listed = self._listed.get(name)
                if listed is not None and seq > listed:
                    continue  # renewed (or put again) since the listing: kept whole
                until = {} if listed is None else {"seq": listed + 1}
                await self._js.purge_stream(stream, subject=self._meta_subject(name), **until)
                if listed is not None and (await self._meta(name))[0] > listed:
                    continue  # renewed between the read and the purge: its chunks stay
                others = self._claims.get(info.nuid, set()) if info is not None else set()
                if info is not None and others <= going:
                    await self._js.purge_stream(stream, subject=f"$O.{self.bucket}.C.{info.nuid}")
        except Exception as err:
            raise wrap(self._url, f"deleting the payloads of run {run_id}", err) from err


def _stamp(headers: Any) -> float:
    """When the server stored a listed message; infinity (a time after any run's end) when
    it does not say."""
    try:
        return parse_stamp(str((headers or {})["Nats-Time-Stamp"]))
    except (KeyError, ValueError, TypeError):
        return math.inf


def _readable(info: Any) -> bool:
    """Whether an object's meta names its chunks as a put writes them (a nuid that is one
    subject token, whole counts): a ``>`` for a nuid would read every object's chunks."""
    nuid, chunks, size = info.nuid, info.chunks, info.size
    return (
        isinstance(nuid, str)
        and nuid.isascii()
        and nuid.isalnum()
        and all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in (chunks, size))
    )
