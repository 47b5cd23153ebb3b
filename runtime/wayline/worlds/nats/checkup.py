"""``wayline doctor`` on a NATS world, and the sync setting a starting worker checks.

The client protocol does not say how a server syncs JetStream's store: only the monitoring
endpoint's ``/varz`` does (``jetstream.config.sync_always`` is true under ``sync_interval:
always``; otherwise ``sync_interval`` holds the flush interval in nanoseconds, 2 minutes by
default, and the key ``sync_always`` is absent). So the sync check needs the monitoring URL: one
given, or the connected host's port 8222 (nats-server's usual monitoring port, the chart's),
used only when the server behind it is the one connected to (same ``server_id``).
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import urllib.error
import urllib.request
from collections.abc import Sequence
from typing import Any
from urllib.parse import urlsplit

from ...errors import ConfigurationError, WaylineError, WorldUnavailableError
from ...world.checkup import Finding, lazy_sync_warning
from .names import Names, partition_of, token_value
from .options import ConnectOptions
from .provision import MIN_SERVER, check_jetstream, recorded_partitions

MONITOR_PORT = 8222
"""nats-server's usual monitoring port (``-m 8222``; the chart's ``http_port``)."""

VARZ_TIMEOUT = 2.0
"""Seconds one ``/varz`` read may take: a check at a worker's start must stay cheap."""

NEAR_LIMIT = 0.9
"""A JetStream account limit used this far is reported: the next writes may be refused."""


def monitor_base(url: str) -> str:
    """``http(s)://host:port`` of a monitoring URL given as such or with ``/varz``; anything
    else is bad input."""
    parts = urlsplit(url)
    path = parts.path.rstrip("/")
    if parts.scheme not in ("http", "https") or not parts.hostname or path not in ("", "/varz"):
        raise ConfigurationError(
            f"not a nats-server monitoring URL: {url!r} (give http://HOST:8222, the server's "
            "-m / http_port address)"
        )
    return f"{parts.scheme}://{parts.netloc}"


def _get(url: str) -> dict[str, Any]:
    with urllib.request.urlopen(url, timeout=VARZ_TIMEOUT) as answer:
        data = json.loads(answer.read())
    if not isinstance(data, dict):
        raise ValueError("not a JSON object")
    return data


async def read_varz(monitor: str) -> dict[str, Any]:
    """The server's ``/varz``; WorldUnavailableError naming the URL when it does not answer
    with one."""
    url = monitor_base(monitor) + "/varz"
    try:
        return await asyncio.to_thread(_get, url)
    except (OSError, ValueError) as err:  # URLError, timeouts and refusals are OSErrors
        why = err.reason if isinstance(err, urllib.error.URLError) else err
        raise WorldUnavailableError(f"cannot read {url}: {why}", url=url) from err


def _duration(nanoseconds: int) -> str:
    seconds = nanoseconds / 1e9
    for unit, size in (("h", 3600), ("m", 60), ("s", 1)):
        if seconds >= size and seconds % size == 0:
            return f"{int(seconds // size)}{unit}"
    return f"{seconds:g}s"


def lazy_setting(varz: dict[str, Any]) -> str | None:
    """The setting (``sync_interval 2m``) under which this server acknowledges a JetStream
    write before it is on disk; None under ``sync_interval: always``. ConfigurationError when
    the server runs no JetStream."""
    config = (varz.get("jetstream") or {}).get("config")
    if not isinstance(config, dict):
        raise ConfigurationError(f"nats-server {varz.get('server_name', '?')} runs no JetStream")
    if config.get("sync_always"):
        return None
    return f"sync_interval {_duration(int(config.get('sync_interval') or 0))}"


def sync_line(varz: dict[str, Any], monitor: str) -> str | None:
    """The one-line warning for a server that acknowledges before fsync, else None."""
    setting = lazy_setting(varz)
    if setting is None:
        return None
    interval = setting.split()[1]
    return lazy_sync_warning(
        f"nats-server {varz.get('server_name', '?')} ({monitor_base(monitor)})",
        setting,
        f"an OS crash or power loss can lose up to {interval} of acknowledged writes, with "
        "replicas too (docs/nats.md); set jetstream { sync_interval: always } (the chart's "
        "nats.syncInterval)",
    )


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _unprotected(check: str, host: str, risk: str) -> Finding:
    """A protection the server does without: fine on loopback, a warning anywhere else."""
    if _loopback(host):
        return Finding(check, "ok", "not used (a loopback server)")
    return Finding(check, "warn", risk)


def connect_failure(message: str) -> Finding:
    """The finding for a connection that failed, under the check its cause belongs to."""
    lowered = message.lower()
    if "authorization" in lowered or "authentication" in lowered:
        return Finding("auth", "fail", message)
    if "tls" in lowered:
        return Finding("tls", "fail", message)
    return Finding("reachable", "fail", message)


def _connection(nc: Any, options: ConnectOptions, shown: str) -> list[Finding]:
    info: dict[str, Any] = getattr(nc, "_server_info", None) or {}
    version = nc.connected_server_version
    host = nc.connected_url.hostname or ""
    found = (int(version.major), int(version.minor))
    name = info.get("server_name") or info.get("server_id", "?")
    reached = f"nats-server {version.major}.{version.minor}.{version.patch} ({name}) at {shown}"
    if found < MIN_SERVER:
        need = f"Wayline needs nats-server >= {MIN_SERVER[0]}.{MIN_SERVER[1]}"
        return [Finding("reachable", "fail", f"{reached}: {need} (JetStream message schedules)")]
    out = [Finding("reachable", "ok", reached)]
    if info.get("auth_required"):
        how = next(
            (
                label
                for label, given in (
                    ("user and password", options.user),
                    ("token", options.token),
                    ("credentials file", options.creds),
                    ("nkey", options.nkeys_seed or options.nkeys_seed_str),
                )
                if given
            ),
            "credentials",
        )
        out.append(Finding("auth", "ok", f"the server requires authentication and took the {how}"))
    else:
        risk = f"{host} requires no authentication: whoever reaches it can read and rewrite the "
        out.append(_unprotected("auth", host, risk + "world (the chart's nats.auth)"))
    if options.asks_tls or info.get("tls_required"):
        out.append(Finding("tls", "ok", "TLS, the server's certificate verified"))
    else:
        risk = f"not used: credentials and payloads cross the network to {host} in clear "
        out.append(_unprotected("tls", host, risk + "(connect with tls://; the chart's nats.tls)"))
    return out


def _limits(info: Any) -> Finding:
    limits = info.limits
    parts, near = [], []
    for label, used, limit in (
        ("storage", info.storage, limits.max_storage),
        ("memory", info.memory, limits.max_memory),
        ("streams", info.streams, limits.max_streams),
        ("consumers", info.consumers, limits.max_consumers),
    ):
        parts.append(f"{label} {used} of {'unlimited' if limit < 0 else limit}")
        if limit >= 0 and used >= NEAR_LIMIT * limit:
            near.append(label)
    text = "account " + ", ".join(parts)
    if limits.max_storage == 0:
        return Finding("jetstream", "fail", f"{text}: the account may not store files")
    if near:
        return Finding(
            "jetstream",
            "warn",
            f"{text}: {' and '.join(near)} at {NEAR_LIMIT:.0%} of the limit or more; the "
            "server refuses writes past it",
        )
    return Finding("jetstream", "ok", text)


async def _world(js: Any, names: Names, prefix: str, url: str) -> Finding:
    import nats.js.errors

    try:
        info = await js.stream_info(names.events_stream)
    except nats.js.errors.NotFoundError:
        return Finding(
            "world",
            "warn",
            f"no world under prefix {prefix!r} yet (stream {names.events_stream}): a worker or "
            "`wayline start` creates it; check the prefix if one should be there",
        )
    config = info.config
    text = (
        f"stream {names.events_stream}: {info.state.messages} messages, "
        f"{config.num_replicas or 1} replica(s), {getattr(config.storage, 'value', 'file')} "
        "storage"
    )
    partitions = await recorded_partitions(js, names, url)
    if partitions == 1:
        return Finding("world", "ok", text)
    text += f"; {partitions} partitions"
    misplaced = await _misplaced(js, names, partitions)
    if misplaced:
        return Finding(
            "world",
            "fail",
            f"{text}: {misplaced} run(s) in {names.events_stream} hash to another partition, "
            "so a release before partitions wrote them and no partitioned worker sees them; "
            'stop every process of such a release (docs/nats.md, "Partitions")',
        )
    return Finding("world", "ok", text)


async def _misplaced(js: Any, names: Names, partitions: int) -> int:
    """How many runs the first partition's events stream holds whose ids hash to another
    partition: only a release from before partitions, which knows the first partition's
    names only, writes a run there. A hashed subject token (a long run id) does not give its
    id back, so such a run is not counted. One stream info that lists every run's subject."""
    info = await js.stream_info(names.events_stream, subjects_filter=names.events_wildcard)
    count = 0
    for subject in info.state.subjects or {}:
        run_id = token_value(str(subject).rpartition(".")[2])
        count += run_id is not None and partition_of(run_id, partitions) != 0
    return count


async def _sync(nc: Any, monitors: Sequence[str]) -> list[Finding]:
    info: dict[str, Any] = getattr(nc, "_server_info", None) or {}
    connected = info.get("server_id")
    if not monitors:
        guess = f"http://{nc.connected_url.hostname}:{MONITOR_PORT}"
        try:
            varz = await read_varz(guess)
        except WaylineError:
            varz = {}
        if varz.get("server_id") != connected or not connected:
            return [
                Finding(
                    "sync",
                    "warn",
                    f"cannot tell whether the server fsyncs before it acknowledges: no "
                    f"monitoring endpoint at {guess} (give --monitor http://HOST:8222); "
                    "nats-server's default does not",
                )
            ]
        monitors = [guess]
    out = []
    for monitor in monitors:
        try:
            varz = await read_varz(monitor)
            line = sync_line(varz, monitor)
        except WaylineError as err:
            out.append(Finding("sync", "fail", err.message))
            continue
        other = "" if varz.get("server_id") == connected else " (not the server connected to)"
        name = varz.get("server_name", "?")
        if line is None:
            text = f"nats-server {name}{other}: sync_interval always (fsync before each ack)"
            out.append(Finding("sync", "ok", text))
        else:
            out.append(Finding("sync", "warn", line + other))
    return out


async def check_connected(
    nc: Any,
    options: ConnectOptions,
    names: Names,
    prefix: str,
    shown: str,
    monitors: Sequence[str],
) -> list[Finding]:
    """Every check past the connection itself, on a connected client."""
    out = _connection(nc, options, shown)
    if any(f.level == "fail" for f in out):
        return out
    js = nc.jetstream(timeout=options.request_timeout)
    try:
        await check_jetstream(nc, js, shown, options.request_timeout)
        out.append(_limits(await js.account_info()))
        out.append(await _world(js, names, prefix, shown))
    except WaylineError as err:
        out.append(Finding("jetstream", "fail", err.message))
        return out
    except Exception as err:  # a JetStream API error: reported, the checks end here
        out.append(Finding("jetstream", "fail", f"{type(err).__name__}: {err}"))
        return out
    return out + await _sync(nc, monitors)
