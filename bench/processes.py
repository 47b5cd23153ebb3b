"""Helpers for a benchmark's child processes: sample one's CPU time and context switches, and
stop one."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from pathlib import Path


def proc_sample(pid: int) -> tuple[float, int, int]:
    """CPU seconds (user + sys), RSS bytes, context switches (voluntary + not) of ``pid``."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    ticks = os.sysconf("SC_CLK_TCK")
    cpu = (int(fields[11]) + int(fields[12])) / ticks
    rss = int(fields[21]) * os.sysconf("SC_PAGE_SIZE")
    switches = 0
    # every thread's (nats-server's work is in threads other than its first)
    for status in Path(f"/proc/{pid}/task").glob("*/status"):
        with contextlib.suppress(OSError):  # a thread that ended meanwhile
            for line in status.read_text().splitlines():
                if "ctxt_switches:" in line:
                    switches += int(line.split()[1])
    return cpu, rss, switches


def stop(proc: subprocess.Popen[str]) -> None:
    """SIGTERM, then SIGKILL if it has not ended within a minute."""
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
