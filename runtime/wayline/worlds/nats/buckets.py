"""The one way the NATS world reaches a KV bucket: :func:`kv_bucket` opens it by name, and
first creates it when told how (``Creation``).

Creating is idempotent: a bucket that exists with the same configuration is opened as it is.
``provision`` creates the buckets every world needs at start (hook tokens, idempotency keys,
the workers' registry), which the log, the queue and the registry then open; a store made on
first use (concurrency slots, rate buckets, buffered hook payloads) creates its own, each
through :class:`BucketOnFirstUse`. Either way a failure is the world's error (``codec.wrap``),
never the client library's.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from .codec import wrap

if TYPE_CHECKING:
    from .names import Names


@dataclass(frozen=True, slots=True)
class Creation:
    """How a bucket is created: one value per key, read directly from any replica."""

    replicas: int
    memory: bool
    """In memory rather than on file (a world whose storage is ``memory``)."""
    ttl: float | None = None
    """Seconds a key is kept after its last write (None: for ever)."""


async def kv_bucket(js: Any, bucket: str, *, url: str, create: Creation | None = None) -> Any:
    """The KV bucket ``bucket``: created first (or opened, when it exists with this
    configuration) when ``create`` says how, else opened as it is, which fails when it is
    missing."""
    if create is None:
        try:
            return await js.key_value(bucket)
        except Exception as err:
            raise wrap(url, f"opening bucket {bucket}", err) from err
    from nats.js.api import KeyValueConfig, StorageType

    store = StorageType.MEMORY if create.memory else StorageType.FILE
    config = KeyValueConfig(
        bucket=bucket,
        history=1,
        ttl=create.ttl,
        storage=store,
        replicas=create.replicas,
        direct=True,
    )
    try:
        return await js.create_key_value(config)
    except Exception as err:
        raise wrap(url, f"creating bucket {bucket}", err) from err


class BucketOnFirstUse:
    """A part of the world kept in a KV bucket of its own that it creates on first use
    (concurrency slots, rate buckets, buffered hook payloads): the bucket is named
    ``<prefix>_<suffix>`` and kept for ``ttl`` seconds after a key's last write (None: for
    ever). ``now`` is the server's clock, as this process knows it (``skew.py``)."""

    suffix: ClassVar[str]
    ttl: ClassVar[float | None] = None

    def __init__(
        self,
        js: Any,
        names: Names,
        *,
        replicas: int,
        memory: bool,
        url: str,
        now: Callable[[], float],
    ) -> None:
        self._js, self._names, self._now = js, names, now
        self._replicas, self._memory, self._url = replicas, memory, url
        self._kv: Any = None

    @property
    def bucket(self) -> str:
        return f"{self._names.prefix}_{self.suffix}"

    async def _bucket(self) -> Any:
        if self._kv is None:
            self._kv = await kv_bucket(
                self._js,
                self.bucket,
                url=self._url,
                create=Creation(self._replicas, self._memory, ttl=self.ttl),
            )
        return self._kv
