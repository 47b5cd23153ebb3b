"""Connection options of the NATS world and the ``nats://`` URL form ``open_world`` uses.

``nats://[user:pass@]host:port[,host2:port]?prefix=...&replicas=...&storage=file|memory``;
``tls://`` implies TLS. Other query parameters: ``visibility_seconds``, ``token``, ``creds``,
``nkeys_seed``, ``tls_ca``, ``tls_cert``, ``tls_key``, ``tls_hostname``, ``name``,
``connect_timeout``, ``connect_attempts``, ``request_timeout``, ``reconnect_time_wait``,
``max_reconnect_attempts``, ``gather_appends`` (the appends of concurrent runs as one atomic
batch, for a server with ``sync_interval: always``: 1 from 16 appends in a turn, N >= 2 from
N; 0, the default: each on its own), ``partitions`` (events and queue streams the world's runs
are spread over by a hash of the run id, fixed when the world is made; 1, the default),
``consume`` (the partitions a worker of this world takes work from, ``0,2``; all by default).
"""

from __future__ import annotations

import errno
import re
import ssl
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, quote, unquote, urlsplit

from ...errors import ConfigurationError


@dataclass(slots=True)
class ConnectOptions:
    servers: list[str]
    user: str | None = None
    password: str | None = None
    token: str | None = None
    creds: str | None = None
    """Path of a ``.creds`` file (JWT + nkey seed)."""
    nkeys_seed: str | None = None
    """Path of an nkey seed file."""
    nkeys_seed_str: str | None = None
    tls: ssl.SSLContext | None = None
    tls_ca: str | None = None
    tls_cert: str | None = None
    tls_key: str | None = None
    tls_hostname: str | None = None
    name: str | None = "wayline"
    connect_timeout: float = 2.0
    connect_attempts: int = 3
    """Initial connection attempts (with backoff) before WorldUnavailableError."""
    reconnect_time_wait: float = 1.0
    max_reconnect_attempts: int = -1
    """After the first connection: -1 retries forever, so an outage pauses work."""
    ping_interval: float = 20.0
    request_timeout: float = 5.0
    extra: dict[str, Any] = field(default_factory=dict)
    """Passed to ``nats.connect`` as they are."""

    @property
    def asks_tls(self) -> bool:
        """TLS was asked for (a ``tls://`` server or a TLS option), not imposed by a server."""
        return bool(
            self.tls is not None
            or self.tls_ca
            or self.tls_cert
            or any(s.startswith("tls://") for s in self.servers)
        )

    def ssl_context(self) -> ssl.SSLContext | None:
        if self.tls is not None:
            return self.tls
        wants_tls = any(s.startswith("tls://") for s in self.servers)
        if not (self.tls_ca or self.tls_cert or wants_tls):
            return None
        with _named(self.tls_ca):
            ctx = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=self.tls_ca)
        if self.tls_cert:
            with _named(
                self.tls_cert if self.tls_key is None else f"{self.tls_cert} or {self.tls_key}"
            ):
                ctx.load_cert_chain(self.tls_cert, self.tls_key)
        return ctx

    def connect_kwargs(self, error_cb: Callable[..., Any]) -> dict[str, Any]:
        kwargs: dict[str, Any] = {
            "servers": list(self.servers),
            "name": self.name,
            "connect_timeout": self.connect_timeout,
            # first connection: each server is tried twice per attempt, 50 ms apart; the
            # world switches to the configured reconnect settings once connected
            "reconnect_time_wait": 0.05,
            "max_reconnect_attempts": 1,
            "ping_interval": self.ping_interval,
            "error_cb": error_cb,
            # the first connection is retried by the world itself (with backoff and a clear
            # error); reconnects are switched on once it is up, see NatsWorld.start
            "allow_reconnect": False,
        }
        for key in ("user", "password", "token", "tls_hostname", "nkeys_seed_str"):
            value = getattr(self, key)
            if value is not None:
                kwargs[key] = value
        if self.creds:
            kwargs["user_credentials"] = self.creds
        if self.nkeys_seed:
            kwargs["nkeys_seed"] = self.nkeys_seed
        ctx = self.ssl_context()
        if ctx is not None:
            kwargs["tls"] = ctx
        kwargs.update(self.extra)
        return kwargs


@contextmanager
def _named(path: str | None) -> Iterator[None]:
    """ssl raises a missing or unreadable file's OSError, and a file holding no certificate's
    SSLError, without its name: give it one, so the connect fails at once naming it
    (``failures.hopeless``) instead of being retried or read as a failed handshake."""
    try:
        yield
    except OSError as err:
        if err.filename or path is None:
            raise
        if isinstance(err, ssl.SSLError):  # read, but holds no certificate or key it could use
            why = f"no certificate or key ssl can load: {err.reason or err}"
            raise OSError(errno.EINVAL, why, path) from err
        raise OSError(err.errno, err.strerror, path) from err


def redact(server: str) -> str:
    """A server URL without its password or token, for messages and ``World.url``. A server
    handed to the constructor without a scheme (``user:pass@host:4222``) is read as the client
    reads it, as ``nats://`` (``urlsplit`` took ``user`` for its scheme and kept the password);
    a user without a password is the client's token. The host part is kept as it was written,
    so an IPv6 address keeps its brackets."""
    if "://" not in server and "@" in server:
        return redact(f"nats://{server}").removeprefix("nats://")
    parts = urlsplit(server)
    if parts.username is None:
        return server
    host = parts.netloc.rpartition("@")[2]
    user = "***" if parts.password is None else f"{parts.username}:***"
    return parts._replace(netloc=f"{user}@{host}").geturl()


_INT = {
    "replicas",
    "connect_attempts",
    "max_reconnect_attempts",
    "gather_appends",
    "partitions",
}
_FLOAT = {
    "visibility_seconds",
    "connect_timeout",
    "request_timeout",
    "reconnect_time_wait",
    "ping_interval",
}
_STR = {
    "prefix",
    "storage",
    "token",
    "creds",
    "nkeys_seed",
    "tls_ca",
    "tls_cert",
    "tls_key",
    "tls_hostname",
    "name",
    "consume",
}


_ONE_SCHEME = re.compile(r",\s*(?:nats|tls)://")


def parse_url(url: str) -> tuple[list[str], dict[str, Any]]:
    """``(servers, options)`` from a ``nats://`` URL; see the module docstring."""
    # Servers may also be listed as NATS's own tools list them, each with its scheme
    # (``nats://a:4222,nats://b:4222``); without this the second scheme ends the URL's host
    # part and the rest is read as a path.
    try:
        parts = urlsplit(_ONE_SCHEME.sub(",", url))
    except ValueError as err:  # an unbalanced bracket: "Invalid IPv6 URL", without the URL
        raise ConfigurationError(
            f"not a NATS URL: {err} (an IPv6 address is written in brackets: [::1]:4222)"
        ) from None
    if parts.scheme not in ("nats", "tls"):
        raise ConfigurationError(f"not a NATS URL (nats:// or tls://): {url!r}", url=url)
    netloc = parts.netloc
    options: dict[str, Any] = {}
    if "@" in netloc:
        userinfo, netloc = netloc.rsplit("@", 1)
        user, sep, password = userinfo.partition(":")
        if sep:
            options["user"], options["password"] = unquote(user), unquote(password)
        else:
            options["token"] = unquote(user)
    hosts = [h.strip() for h in netloc.split(",") if h.strip()]
    if not hosts:
        raise ConfigurationError(f"NATS URL names no server: {url!r}", url=url)
    for host in hosts:
        _check_host(host, cut="@" not in parts.netloc and "@" in url)
    servers = [f"{parts.scheme}://{h if ':' in h else h + ':4222'}" for h in hosts]
    seen: set[str] = set()
    for key, value in parse_qsl(parts.query, keep_blank_values=False):
        if key in seen:
            raise ConfigurationError(f"{key}= is given twice in NATS URL {url!r}", url=url)
        seen.add(key)
        try:
            if key in _INT:
                options[key] = int(value)
            elif key in _FLOAT:
                options[key] = float(value)
            elif key in _STR:
                options[key] = value
            else:
                raise ConfigurationError(f"unknown NATS URL option {key!r} in {url!r}", url=url)
        except ValueError as err:
            raise ConfigurationError(f"bad value for {key} in NATS URL: {value!r}") from err
    return servers, options


def check_server(server: str) -> None:
    """:func:`_check_port` for one server handed to the ``NatsWorld`` constructor as the
    client takes it (``nats://host:port``, ``tls://user:pass@host:port`` or ``host:port``), so
    that it is refused as a URL's server is, naming the host and never the password."""
    rest = server.partition("://")[2] if "://" in server else server
    authority = _AUTHORITY_END.split(rest, maxsplit=1)[0]
    host = authority.rpartition("@")[2]
    if not host:
        raise ConfigurationError("a NATS server handed to NatsWorld names no host")
    _check_host(host, cut="@" not in authority and "@" in rest)


_AUTHORITY_END = re.compile(r"[/?#]")
"""Where the client's URL parser ends a server's host part."""


def _check_host(host: str, *, cut: bool) -> None:
    """:func:`_check_port`; ``cut``: an ``@`` stands after the end of the host part, so the
    part read as the host is likely the start of a user or password that holds a ``/``, ``?``
    or ``#`` (the client reads ``u:pa/ss@h`` as host ``u``, port ``pa``). Then the error says
    so and names nothing of the server, as what it would name is that password."""
    try:
        _check_port(host)
    except ConfigurationError:
        if not cut:
            raise
        raise ConfigurationError(
            "bad NATS server: its host part ends at a '/', '?' or '#' that stands before an "
            "'@'; a user or password that holds one is percent-encoded (%2F, %3F, %23)"
        ) from None


def _check_port(host: str) -> None:
    """A ConfigurationError naming ``host`` (never the URL, which may hold a password) if it
    gives a port that is not 1-65535: the client would try it as a server that is down."""
    if any(c.isspace() for c in host):
        raise ConfigurationError(
            f"bad NATS server {host!r}: a host holds no space; servers are listed with commas"
        )
    if host.startswith("["):  # an IPv6 address, [::1] or [::1]:4222
        address, closed, rest = host[1:].partition("]")
        if not closed or not address or (rest and not rest.startswith(":")):
            raise ConfigurationError(
                f"bad NATS server {host!r}: an IPv6 address is written [address] or "
                "[address]:port, as [::1]:4222"
            )
        port = rest[1:] if rest else None
    elif "]" in host or host.count(":") > 1:
        # The client reads ``::1`` or ``2001:db8::10:4222`` as no URL at all, and the world
        # tried it as a server that is down; the last group is not a port either way.
        raise ConfigurationError(
            f"bad NATS server {host!r}: an IPv6 address is written in brackets, "
            "[address] or [address]:port, as [::1]:4222"
        )
    else:
        port = host.rpartition(":")[2] if ":" in host else None
    if port is not None and not (port.isascii() and port.isdigit() and 0 < int(port) < 65536):
        raise ConfigurationError(
            f"bad port {port!r} for NATS server {host!r}: expected a number from 1 to 65535"
        )


def display_url(servers: list[str], prefix: str, partitions: int = 1) -> str:
    shown = ",".join(redact(s) for s in servers)
    parted = f"&partitions={partitions}" if partitions != 1 else ""
    return f"{shown}?prefix={quote(prefix)}{parted}"
