"""Starts and stops the power-loss filesystem (``lazyfs``) in its own process, and cuts its
power. Nothing is left mounted whatever happens: ``close`` always unmounts (lazily, so a
process still holding a file there cannot keep the mount alive)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.servers import dying_with_us

ROOT = Path(__file__).resolve().parents[2]


def mounted(path: Path) -> bool:
    """Whether ``path`` is a mount point, by the mount table: ``os.path.ismount`` stats the
    path, which fails (and answers False) once the layer's process is dead."""
    target = os.path.realpath(path)
    with open("/proc/self/mounts") as fh:
        return any(line.split()[1].encode().decode("unicode_escape") == target for line in fh)


def fuse_missing() -> str | None:
    """Why a FUSE mount cannot be made here, or None."""
    if not os.path.exists("/dev/fuse"):
        return "/dev/fuse is missing"
    if shutil.which("fusermount3") is None:
        return "fusermount3 is missing (apt-get install fuse3; `make fuse` does it)"
    try:
        import mfusepy  # noqa: F401
    except (ImportError, OSError) as err:
        return f"mfusepy cannot load libfuse3: {err}"
    return None


class LazyMount:
    """``mount`` shows ``backing`` through the power-loss layer while ``up``."""

    def __init__(self, backing: Path, mount: Path, trace: Path | None = None) -> None:
        self.backing = backing
        self.mount = mount
        self.trace = trace
        self.proc: subprocess.Popen[bytes] | None = None
        self._log = mount.parent / f"{mount.name}.lazyfs.log"

    def start(self, timeout: float = 15.0) -> None:
        self.backing.mkdir(parents=True, exist_ok=True)
        self.mount.mkdir(parents=True, exist_ok=True)
        args = [sys.executable, "-m", "tests.powercut.lazyfs", str(self.backing), str(self.mount)]
        if self.trace is not None:
            args.append(str(self.trace))
        with open(self._log, "ab") as log:
            # libfuse 3 by name: where libfuse 2 is installed too, mfusepy would take that one.
            env = {**os.environ, "FUSE_LIBRARY_NAME": "fuse3"}
            self.proc = subprocess.Popen(dying_with_us(args), cwd=ROOT, stderr=log, env=env)
        deadline = time.monotonic() + timeout
        while not mounted(self.mount):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.close()
                raise RuntimeError(f"lazyfs did not mount: {self._log.read_text()[-2000:]}")
            time.sleep(0.05)

    @property
    def up(self) -> bool:
        return self.proc is not None and self.proc.poll() is None and mounted(self.mount)

    def cut(self) -> None:
        """The power cut: the layer's process dies with every unsynced write in its memory,
        and the mount goes. Stop the processes writing here first (they die in the same cut);
        the backing directory then holds exactly what was fsynced."""
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)
        self._unmount()

    def close(self) -> None:
        """Tear down without losing anything a test still needs: same as a cut (the layer
        never writes unsynced data through, so there is no cleaner way down), and always
        unmounted afterwards."""
        self.cut()

    def _unmount(self) -> None:
        for command in (["fusermount3", "-u", "-z"], ["umount", "-l"]):
            if not mounted(self.mount):
                return
            subprocess.run([*command, str(self.mount)], capture_output=True, check=False)
        if mounted(self.mount):
            raise RuntimeError(f"{self.mount} is still mounted")
