"""``wayline worker --processes N``: N worker processes under one supervisor, so a worker pod
uses every core it is given.

Each child is ``wayline worker ... --processes 1`` with its own world connection; the
supervisor only starts, watches and stops them. SIGTERM/SIGINT to the supervisor is passed to
every child, each drains (in-flight deliveries finish, up to ``--shutdown-grace``) and closes
(a child still waiting for its world stops at once, exit 0); a second signal is passed on too
(each child then exits at once, as after a crash, which the runtime recovers from). Each
child runs in a session (so a process group) of its own: a terminal's Ctrl-C, which signals
the whole foreground process group, reaches the supervisor alone, and each child hears it
once, from the supervisor (a drain, not a second signal). A child that dies while the
supervisor runs is started again, after a back-off that grows while it keeps dying quickly.
The supervisor's exit code: 0 when every child drained cleanly (after SIGTERM or SIGINT
alike, as a lone worker); 130 when a second signal cut the drains short; 2 when a child
refused its input (the same arguments would fail again, so the others are stopped); 1 when a
child kept dying (more than ``MAX_QUICK_DEATHS`` times, each within ``STABLE_SECONDS`` of its
start) or a child did not end its drain with 0.

Only the first child serves ``--health-port`` and ``--metrics-port`` (two processes cannot
bind one port). A child whose supervisor is gone (killed outright) stops by itself
(``--supervised-by``), in any phase, also while it still waits for its world: on Linux the
kernel sends it SIGHUP (the parent-death signal, asked for before anything slow; not SIGTERM,
which would read as a second signal in a child that drains already), elsewhere it notices the
re-parenting within a second. A child that was draining finishes its drain.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import logging
import math
import os
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path

from ..waits import wait_set

__all__ = ["Supervisor", "cpu_quota", "default_processes", "die_with_parent", "orphaned"]

log = logging.getLogger("wayline.cli")

MAX_QUICK_DEATHS = 5
STABLE_SECONDS = 30.0
USAGE_EXIT = 2
PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def cpu_quota(root: Path = Path("/sys/fs/cgroup")) -> int | None:
    """The container's CPU limit in whole CPUs (rounded up), or None without a limit: cgroup
    v2 ``cpu.max`` (``"200000 100000"``), else cgroup v1 ``cpu.cfs_quota_us`` / period."""
    with contextlib.suppress(OSError, ValueError):
        quota, period = (root / "cpu.max").read_text().split()[:2]
        if quota == "max":
            return None
        return max(1, math.ceil(int(quota) / int(period)))
    with contextlib.suppress(OSError, ValueError):
        v1 = root / "cpu"
        quota_us = int((v1 / "cpu.cfs_quota_us").read_text())
        period_us = int((v1 / "cpu.cfs_period_us").read_text())
        if quota_us > 0 and period_us > 0:
            return max(1, math.ceil(quota_us / period_us))
    return None


def default_processes() -> int:
    """The container's CPU quota, else the CPUs this process may run on."""
    try:
        available = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        available = os.cpu_count() or 1
    quota = cpu_quota()
    return max(1, min(available, quota) if quota is not None else available)


def orphaned(supervisor: int | None) -> bool:
    """In a child of the supervisor ``supervisor`` (its pid, ``--supervised-by``): True once
    that supervisor is gone (this process was re-parented)."""
    return supervisor is not None and os.getppid() != supervisor


def die_with_parent(signum: int) -> bool:
    """Linux: have the kernel send ``signum`` to this process when its parent ends
    (``prctl(PR_SET_PDEATHSIG)``). False where that cannot be asked for; the caller then relies
    on polling :func:`orphaned`.

    The kernel sends it when the *thread* that forked this process ends, not the process. The
    supervisor forks from its event loop's thread (asyncio's subprocess transport calls
    ``Popen`` there), which is the main thread of ``wayline worker`` and lives as long as it."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)  # the libc this interpreter is linked to
        return int(libc.prctl(PR_SET_PDEATHSIG, signum, 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


class Supervisor:
    """Runs ``processes`` children, child ``i`` started with ``argv(i)``, until a signal."""

    def __init__(self, argv: Callable[[int], list[str]], processes: int) -> None:
        self.argv = argv
        self.processes = processes
        self.children: dict[int, asyncio.subprocess.Process] = {}
        self.stopping = asyncio.Event()
        self.signals = 0
        self.exit_code = 0
        self.drain_codes: dict[int, int] = {}

    async def run(self) -> int:
        loop = asyncio.get_running_loop()
        for s in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(s, self._on_signal, s)
        try:
            log.info("supervisor %d: starting %d worker processes", os.getpid(), self.processes)
            await asyncio.gather(*(self._slot(i) for i in range(self.processes)))
        finally:
            for s in (signal.SIGINT, signal.SIGTERM):
                loop.remove_signal_handler(s)
        # A child stopped before it installed its signal handlers ends by the signal itself
        # (-15): it had not started consuming, so it held nothing and that is a clean stop.
        clean = {0, -signal.SIGTERM, -signal.SIGINT}
        failed = {i: c for i, c in self.drain_codes.items() if c not in clean}
        if failed and self.exit_code == 0:
            self.exit_code = 130 if self.signals > 1 else 1
        if failed:
            log.error("worker processes that did not drain cleanly (slot: exit code): %s", failed)
        log.info("supervisor %d stopped (exit %d)", os.getpid(), self.exit_code)
        return self.exit_code

    def _on_signal(self, signum: int) -> None:
        self.signals += 1
        if self.signals == 1:
            log.info(
                "%s: stopping %d worker processes (each drains first)",
                signal.Signals(signum).name,
                len(self.children),
            )
        self._stop(signum)

    def _stop(self, signum: int = signal.SIGTERM) -> None:
        self.stopping.set()
        for child in self.children.values():
            if child.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    child.send_signal(signum)

    async def _slot(self, index: int) -> None:
        quick_deaths = 0
        while not self.stopping.is_set():
            # A session of its own: a terminal's Ctrl-C (SIGINT to the whole foreground
            # process group) reaches the supervisor only, which passes it on once; had the
            # child heard it from the terminal too, the passed-on one would be its second
            # signal (exit at once, its bodies cut off). Its parent-death signal is unchanged.
            child = await asyncio.create_subprocess_exec(
                *self.argv(index), stdin=asyncio.subprocess.DEVNULL, start_new_session=True
            )
            self.children[index] = child
            started = time.monotonic()
            log.info("worker process %d started (pid %d)", index, child.pid)
            if self.stopping.is_set():  # a signal came while it was being started
                child.send_signal(signal.SIGTERM)
            code = await child.wait()
            if self.stopping.is_set():
                self.drain_codes[index] = code
                return
            if code == USAGE_EXIT:
                log.error("worker process %d refused its arguments (exit 2); stopping", index)
                self.exit_code = USAGE_EXIT
                self._stop()
                return
            quick_deaths = quick_deaths + 1 if time.monotonic() - started < STABLE_SECONDS else 1
            if quick_deaths > MAX_QUICK_DEATHS:
                log.error(
                    "worker process %d died %d times in a row soon after starting; stopping",
                    index,
                    quick_deaths,
                )
                self.exit_code = 1
                self._stop()
                return
            delay = min(10.0, 0.25 * 2 ** (quick_deaths - 1))
            log.warning(
                "worker process %d (pid %d) exited with %d; starting another in %.2gs",
                index,
                child.pid,
                code,
                delay,
            )
            await wait_set(self.stopping, delay)
