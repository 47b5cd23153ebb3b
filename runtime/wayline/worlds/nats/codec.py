"""Bytes on the wire: event-log messages, server timestamps, queue payloads, error mapping."""

from __future__ import annotations

import calendar
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from ..._core import jsoncodec
from ...errors import WorldError, WorldStorageFullError, WorldUnavailableError

HERE = -1.0
"""In a stored run summary: "the timestamp of this very message" (unknown when it is written)."""


def parse_stamp(text: str) -> float:
    """RFC 3339 as the server writes it (``2026-12-02T12:33:03.187948414Z``) → epoch seconds.
    ValueError for anything else (a fraction that is not digits: ``.1e999`` read as infinity)."""
    text = text.strip()
    if text.endswith("Z") and len(text) >= 20 and text[19] in ".Z":
        base, frac = text[:19], text[20:-1]
        if frac and not (frac.isascii() and frac.isdigit()):
            raise ValueError(f"not a timestamp: {text[:64]!r}")
        whole = calendar.timegm(
            (
                int(base[0:4]),
                int(base[5:7]),
                int(base[8:10]),
                int(base[11:13]),
                int(base[14:16]),
                int(base[17:19]),
                0,
                0,
                0,
            )
        )
        return whole + (float("0." + frac) if frac else 0.0)
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def parse_header_lines(raw: bytes) -> dict[str, str]:
    """nats-py's header-block parser, same results, without its per-character whitespace
    scan of every name (a tenth of a busy worker's CPU). Installed per connection."""
    out: dict[str, str] = {}
    for line in raw.split(b"\r\n"):
        name, sep, value = line.partition(b":")
        if not sep:
            continue
        try:
            key = name.strip().decode("ascii")
        except UnicodeDecodeError:
            continue
        if key and key.split() != [key]:  # a name holding whitespace is invalid
            continue
        out[key] = value.strip().decode("utf-8", "replace")
    return out


def rfc3339(epoch: float) -> str:
    """Epoch seconds → RFC 3339 UTC with microseconds, for ``Nats-Schedule: @at``."""
    dt = datetime.fromtimestamp(epoch, UTC)
    return dt.isoformat(timespec="microseconds").replace("+00:00", "Z")


def dumps(value: Any) -> bytes:
    """Compact JSON, as bytes, in the process's codec (``wayline._core.jsoncodec``)."""
    return jsoncodec.dumps(value)


def decode_payload(raw: bytes) -> dict[str, Any] | None:
    try:
        value = jsoncodec.loads(raw)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def summary_from(info: Mapping[str, Any] | None, stamp: float) -> dict[str, Any] | None:
    """A stored run summary with ``HERE`` replaced by the message's own timestamp."""
    if info is None:
        return None
    out = dict(info)
    for key in ("createdAt", "startedAt", "endedAt"):
        if out.get(key) == HERE:
            out[key] = stamp
    return out


def is_wrong_last_sequence(err: BaseException) -> bool:
    code = getattr(err, "err_code", None)
    return code == 10071 or "wrong last sequence" in str(err)


STORE_FULL_CODES = frozenset({10023, 10047})
"""JetStream's answers to a write its file store has no room for: 10023 "insufficient
resources" (the server's ``max_file_store`` reached; observed with nats-server 2.15) and
10047 "insufficient storage resources available" (a stream's reservation, its ``max_bytes``,
that the limit has no room for)."""


def unavailable(url: str, what: str, err: BaseException) -> WorldUnavailableError:
    detail = str(err) or type(err).__name__
    code = getattr(err, "err_code", None)
    if code in STORE_FULL_CODES:
        description = getattr(err, "description", None) or detail
        return WorldStorageFullError(
            f"NATS at {url}: {what} failed: JetStream's store is full ({description}, "
            f"err_code {code}); nothing of it was stored, and it succeeds again once the "
            "store has room",
            url=url,
            err_code=code,
        )
    return WorldUnavailableError(f"NATS at {url}: {what} failed ({detail})", url=url)


def wrap(url: str, what: str, err: BaseException) -> WorldError:
    """A nats exception as the wayline error the runtime handles."""
    import nats.errors
    import nats.js.errors

    transient = (
        nats.errors.TimeoutError,
        nats.errors.ConnectionClosedError,
        nats.errors.ConnectionReconnectingError,
        nats.errors.NoRespondersError,
        nats.errors.OutboundBufferLimitError,
        nats.errors.StaleConnectionError,
        nats.errors.NoServersError,
        nats.js.errors.ServiceUnavailableError,
        # "no responders" (503) on a JetStream publish: the stream has no leader right now
        # (an election, a server restarting) - the next try may well succeed
        nats.js.errors.NoStreamResponseError,
        TimeoutError,
        OSError,
    )
    full = getattr(err, "err_code", None) in STORE_FULL_CODES  # 10047 is a 500
    if full or isinstance(err, transient) or getattr(err, "code", None) == 503:
        return unavailable(url, what, err)
    return WorldError(f"NATS at {url}: {what} failed ({err})", url=url)
