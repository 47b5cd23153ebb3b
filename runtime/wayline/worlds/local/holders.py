"""Who holds a delivery: ``host:pid:starttime``, so a dead holder's messages come back at once.

The process start time (from /proc) guards against pid reuse: a recycled pid with another start
time is a different process.
"""

from __future__ import annotations

import os
import socket


def _start_time(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            stat = fh.read().decode(errors="replace")
    except OSError:
        return None
    # Field 22 (starttime); the command name (field 2) may contain spaces, so split after ')'.
    rest = stat.rsplit(")", 1)[-1].split()
    return rest[19] if len(rest) > 19 else None


HOST = socket.gethostname()


def current_holder() -> str:
    return holder_of(os.getpid())


def holder_of(pid: int) -> str:
    """``host:pid:starttime`` of process ``pid`` of this host (``?`` for a start time that
    cannot be read, when only the pid is checked)."""
    return f"{HOST}:{pid}:{_start_time(pid) or '?'}"


def holder_alive(holder: str) -> bool:
    """False only when the holder is on this host and provably gone."""
    try:
        host, pid_text, start = holder.rsplit(":", 2)
        pid = int(pid_text)
    except ValueError:
        return True
    if host != HOST:
        return True
    if start != "?":
        return _start_time(pid) == start
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
