"""The NATS world's connection: connecting (with its attempts and the answers not worth
another), the stream a world that is not created must find, and closing a client within a
bound, whatever state nats-py left it in."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from ..._core.cancels import cancels
from ...errors import ConfigurationError, WorldNotCreatedError, WorldUnavailableError
from .codec import parse_header_lines, wrap
from .direct import lost_replies
from .eventlog import EventLog
from .failures import connect_bound, hopeless
from .options import ConnectOptions
from .tls_only import refuse_plaintext

log = logging.getLogger("wayline.worlds.nats")


@dataclass(frozen=True)
class Link:
    """What a part of the world reads of its connection: the client, the JetStream context and
    the event log as the world holds them now (None before a start and after a close), and how
    the servers are named in errors."""

    nc: Callable[[], Any]
    js: Callable[[], Any]
    log: Callable[[], EventLog | None]
    url: str
    """The world's URL, as ``WorldUnavailableError`` names it."""
    shown: str
    """The servers with their secrets redacted, as the client library's errors are wrapped."""
    timeout: float
    """Seconds a request waits for its answer."""


async def connect(
    opts: ConnectOptions,
    shown: str,
    on_client_error: Callable[[Exception], Awaitable[None]],
    on_disconnect: Callable[[], Awaitable[None]],
    on_reconnect: Callable[[], Awaitable[None]],
) -> Any:
    """A connected client, after up to ``opts.connect_attempts`` attempts; an answer that
    will not change (a refused login, a TLS failure) is not tried again."""
    try:
        from nats.aio.client import Client
    except ImportError as err:  # pragma: no cover - nats-py is an optional dependency
        raise ConfigurationError(
            "the NATS world needs nats-py: pip install 'wayline[nats]'"
        ) from err
    last: BaseException | None = None
    delay = 0.1
    for attempt in range(opts.connect_attempts):
        nc = Client()
        nc._parse_header_lines = parse_header_lines  # type: ignore[method-assign]
        if opts.asks_tls:
            refuse_plaintext(nc, shown)
        errors: list[BaseException] = []

        async def on_error(err: Exception, errors: list[BaseException] = errors) -> None:
            errors.append(err)  # nats-py reports a TLS failure here, then keeps waiting
            await on_client_error(err)

        connecting = asyncio.ensure_future(
            nc.connect(
                **opts.connect_kwargs(on_error),
                disconnected_cb=on_disconnect,
                reconnected_cb=on_reconnect,
            )
        )
        # A stop that cancels this attempt can be swallowed inside nats-py (Python 3.11's
        # wait_for returns what its socket connect gave when both come at once), so the
        # attempt then ends with NoServersError after ``wait_for`` has raised CancelledError
        # here: read, its error is not logged as "Task exception was never retrieved".
        connecting.add_done_callback(_retrieved)
        try:
            # bounded: nats-py can wait forever on a TLS handshake that failed
            await _bounded_attempt(
                connecting, connect_bound(opts.connect_timeout, len(opts.servers))
            )
        except asyncio.CancelledError:  # a stop while connecting: leave nothing open
            await close_transport(nc, opts.connect_timeout)
            raise
        except Exception as err:  # reported below with the URL
            last = err
            await close_transport(nc, opts.connect_timeout)
            log.debug(
                "connecting to %s failed (attempt %d): %r",
                shown,
                attempt + 1,
                err,
            )
            cause = hopeless([*errors, err], asked_tls=opts.asks_tls)
            if cause is not None:  # the same answer every time: no retries
                raise ConfigurationError(
                    f"cannot connect to NATS at {shown}: {cause}",
                    url=shown,
                ) from err
            if attempt + 1 < opts.connect_attempts:
                await asyncio.sleep(delay)
                delay = min(delay * 3, 2.0)
            continue
        # from now on an outage pauses work: the client reconnects (forever by default)
        nc.options["allow_reconnect"] = True
        nc.options["max_reconnect_attempts"] = opts.max_reconnect_attempts
        nc.options["reconnect_time_wait"] = opts.reconnect_time_wait
        return nc
    detail = f"{type(last).__name__}: {last}" if last is not None else "unknown error"
    raise WorldUnavailableError(
        f"cannot connect to NATS at {shown} after {opts.connect_attempts} attempts ({detail})",
        url=shown,
    ) from last


async def _bounded_attempt(connecting: asyncio.Future[Any], bound: float) -> None:
    """Waits ``bound`` seconds for ``connecting`` and raises what it raised, or TimeoutError.
    A stop is never lost: Python 3.11's ``wait_for`` returns the outcome, and drops the
    stop, when the two come in the same turn of the loop; here the stop is raised whatever
    the attempt did, once the attempt has ended, so that its client can be closed."""
    try:
        done, _ = await asyncio.wait((connecting,), timeout=bound)
    except asyncio.CancelledError:
        connecting.cancel()
        await asyncio.wait((connecting,))  # nats-py may go on after the cancel: let it end
        raise
    if not done:
        connecting.cancel()
        await asyncio.wait((connecting,))
        if connecting.cancelled():
            raise TimeoutError(f"no connection within {bound:g} s")
    connecting.result()


def _retrieved(task: asyncio.Future[Any]) -> None:
    """Marks the outcome of ``task`` as read, whoever awaits it."""
    if not task.cancelled():
        task.exception()


_CLOSE_SECONDS = 5.0
"""Bound on a close (flush and drain included): a server that stopped answering must not hold
a worker's shutdown, which has its own grace period to keep."""


async def refuse_missing(js: Any, stream: str, prefix: str, url: str) -> None:
    import nats.js.errors

    try:
        await js.stream_info(stream)
    except nats.js.errors.NotFoundError:
        raise WorldNotCreatedError(
            f"no world at {url} with prefix {prefix!r}: its stream {stream} does not exist "
            "(check the prefix in --world or WAYLINE_WORLD; a worker or `wayline start` "
            "creates it)",
            url=url,
        ) from None
    except Exception as err:
        raise wrap(url, f"looking for stream {stream}", err) from err


def fail_in_flight(nc: Any, error: Callable[[], BaseException]) -> None:
    """The requests waiting on the connection's replies fail with ``error()``: the world's
    own (acknowledged publishes, direct gets) and nats-py's."""
    lost_replies(nc, error)
    for future in list((getattr(nc, "_resp_map", None) or {}).values()):
        if not future.done():
            future.set_exception(error())
            future.exception()  # retrieved: one whose request raised at its publish (a
            # request begun as the connection closed) is awaited by no one


async def close_quietly(nc: Any, bound: float = _CLOSE_SECONDS) -> None:
    await _bounded(nc.close(), bound, "closing the NATS connection")


async def _bounded(aw: Any, bound: float, what: str) -> bool:
    """Await ``aw`` for at most ``bound`` seconds; False (logged) when it failed. A
    CancelledError that is not this task's own (nats-py cancels its close waiters when a TLS
    handshake fails) is a failure like any other. The task's own is a cancel counted since
    the wait began: one counted before it, which the caller caught and handled, made every
    failed TLS handshake a stop of the start."""
    stops = cancels()
    try:
        await asyncio.wait_for(aw, timeout=bound)
        return True
    except asyncio.CancelledError:
        if cancels() > stops:
            raise
        log.debug("%s was cancelled under it", what)
    except Exception as err:  # closing anyway
        log.debug("%s failed: %r", what, err)
    return False


async def close_transport(nc: Any, bound: float = _CLOSE_SECONDS) -> None:
    """A client whose first connection failed (say, on authorization) may still hold its
    socket; close it so nothing leaks. Bounded: after a failed TLS handshake nats-py's close
    can wait forever."""
    transport = getattr(nc, "_transport", None)
    await _bounded(nc.close(), bound, "closing a failed NATS connection")
    transport = getattr(nc, "_transport", None) or transport
    if transport is not None:
        try:
            transport.close()
        except Exception as err:  # closing anyway
            log.debug("closing a failed NATS transport failed: %r", err)
        await _bounded(transport.wait_closed(), bound, "closing a failed NATS transport")
    _abort(nc)


def _abort(nc: Any) -> None:
    """Cancel what a client left running after a close that did not finish."""
    for name in ("_reading_task", "_flusher_task", "_ping_interval_task", "_reconnection_task"):
        task = getattr(nc, name, None)
        if isinstance(task, asyncio.Task) and not task.done():
            task.cancel()
