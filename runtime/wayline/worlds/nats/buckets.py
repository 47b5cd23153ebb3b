"""The one way the NATS world reaches a KV bucket: :func:`kv_bucket` opens it by name, and
first creates it when told how (``Creation``).

Creating is idempotent: a bucket that exists with the same configuration is opened as it is.
``provision`` creates the buckets every world needs at start (hook tokens, idempotency keys,
the workers' registry), which the log, the queue and the registry then open; a store made on
first use (concurrency slots, rate buckets, buffered hook payloads) creates its own, each
through :class:`BucketOnFirstUse`. Either way a failure is the world's error (``codec.wrap``),
never the client library's.

On a JetStream cluster, creating is not done when the create is answered: processes (or tasks)
that create one bucket at once race, and all but the first are answered at once, while the
meta leader still places the stream, by a timeout or no answer, and the bucket's stream has no
leader yet, so the first read (a direct get: 503, no responders) or write (no response from
stream) of it fails. :func:`settled` asks again for an answer that may have raced, and waits,
bounded, until the stream has a leader. First use only: nothing of it is on a step's path.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from ...errors import WorldError, WorldUnavailableError
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
    return await settled(
        lambda: js.create_key_value(config),
        js,
        f"KV_{bucket}",
        url=url,
        what=f"creating bucket {bucket}",
        replicas=create.replicas,
    )


SETTLE_TIMEOUTS = 2
"""How long, in request timeouts (the JetStream context's), a create that raced another and
the new stream's election of a leader are waited for: a 3-node cluster on a loaded machine
places and elects in about a second; a stream with no leader after two timeouts is an outage
(a lost quorum), reported as a start without one always was, not a race."""

_SETTLE_PAUSE = (0.02, 0.5)
"""The first and the longest pause between two asks while a create settles (doubling)."""


async def settled(
    create: Callable[[], Any],
    js: Any,
    stream: str,
    *,
    url: str,
    what: str,
    replicas: int,
) -> Any:
    """``await create()`` (an idempotent create of ``stream``: the same configuration is
    answered as it stands), asked again while the answer is a cluster's race (no answer, no
    responders, a timeout; "stream name already in use", which a real mismatch answers again
    once the racing create is placed, so it fails then), and, for a replicated stream, once
    the stream's group has a leader. A failure is the world's error; one still racing after
    ``SETTLE_TIMEOUTS`` request timeouts is ``WorldUnavailableError``."""
    import nats.js.errors

    loop = asyncio.get_running_loop()
    deadline = _settle_deadline(js)
    pause = _SETTLE_PAUSE[0]
    raced_name = False
    while True:
        try:
            made = await create()
            break
        except nats.js.errors.BadRequestError as err:
            if getattr(err, "err_code", None) != 10058 or raced_name:
                raise wrap(url, what, err) from err
            raced_name = True  # once: the racing create may be half placed
            failure: WorldError = wrap(url, what, err)
            failure.__cause__ = err
        except WorldError:
            raise
        except Exception as err:
            failure = wrap(url, what, err)
            if not isinstance(failure, WorldUnavailableError):
                raise failure from err
            failure.__cause__ = err
        if loop.time() + pause > deadline:
            raise failure
        await asyncio.sleep(pause)
        pause = min(_SETTLE_PAUSE[1], pause * 2)
    if replicas > 1:
        await led(js, stream, url=url, what=what, deadline=deadline)
    return made


def _settle_deadline(js: Any) -> float:
    timeout = float(getattr(js, "_timeout", 5.0))
    return asyncio.get_running_loop().time() + SETTLE_TIMEOUTS * timeout


async def led(js: Any, stream: str, *, url: str, what: str, deadline: float | None = None) -> None:
    """Wait until ``stream`` has a leader (the one who answers a write and a leader get, and
    subscribes to direct gets), by its stream info; a server that is not clustered names
    none and needs none. Also for a stream found made by another process, which may still
    be electing one."""
    import nats.js.errors

    loop = asyncio.get_running_loop()
    if deadline is None:
        deadline = _settle_deadline(js)
    pause = _SETTLE_PAUSE[0]
    while True:
        detail = "no leader elected"
        try:
            info = await js.stream_info(stream)
            cluster = getattr(info, "cluster", None)
            if cluster is None:
                return
            # a leader named may not serve direct gets yet (the first read of a bucket is
            # one, answered 503 in 1 of some 20 concurrent first uses): one is asked
            if getattr(cluster, "leader", None) and (
                not getattr(info.config, "allow_direct", False) or await _answers_direct(js, stream)
            ):
                return
        except nats.js.errors.NotFoundError as err:
            # the server asked has not applied the create it answered for: not yet
            detail = str(err) or type(err).__name__
        except Exception as err:
            failure = wrap(url, f"{what}: waiting for its leader", err)
            if not isinstance(failure, WorldUnavailableError):
                raise failure from err
            detail = str(err) or type(err).__name__
        if loop.time() + pause > deadline:
            raise WorldUnavailableError(
                f"NATS at {url}: {what} failed: stream {stream} has no leader yet ({detail}); "
                "the cluster may have lost its quorum",
                url=url,
            )
        await asyncio.sleep(pause)
        pause = min(_SETTLE_PAUSE[1], pause * 2)


async def _answers_direct(js: Any, stream: str) -> bool:
    """Whether a direct get on ``stream`` (of its first message, there or not) is answered
    rather than refused as having no responders (503)."""
    import nats.errors

    request = b'{"seq":1}'
    try:
        reply = await js._nc.request(f"$JS.API.DIRECT.GET.{stream}", request, timeout=js._timeout)
    except nats.errors.NoRespondersError:
        return False
    headers = reply.headers or {}
    # a stored message carries Nats-Sequence; its own Status header is no answer of the server
    return "Nats-Sequence" in headers or headers.get("Status") != "503"


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
        self._creating = asyncio.Lock()
        """The tasks of one world that first use the bucket at once create it once."""

    @property
    def bucket(self) -> str:
        return f"{self._names.prefix}_{self.suffix}"

    async def _bucket(self) -> Any:
        if self._kv is None:
            async with self._creating:
                if self._kv is None:
                    self._kv = await kv_bucket(
                        self._js,
                        self.bucket,
                        url=self._url,
                        create=Creation(self._replicas, self._memory, ttl=self.ttl),
                    )
        return self._kv
