"""A small real filesystem for the full-disk tests: a tmpfs mounted in the test's temporary
directory, filled by a filler file and freed by deleting it.

Mounting needs root. Without it the tests are skipped, or fail when ``CI=true`` /
``WAYLINE_REQUIRE_ALL_COMPONENTS=1`` (a skip there would hide a claim never checked). The
filesystem is unmounted at the end of the test whatever happened in it.

PYTEST_DONT_REWRITE: conftest imports this module before registering it as a plugin.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

SIZE = "8m"
"""Small enough to fill in a moment, large enough for a world's files and a few runs."""


def _required() -> bool:
    return os.environ.get("WAYLINE_REQUIRE_ALL_COMPONENTS") == "1" or os.environ.get("CI") == "true"


class SmallDisk:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.filler = path / "filler"

    def fill(self) -> None:
        """Write the filler until the filesystem refuses a block: nothing is left for anyone."""
        chunk = b"\0" * 4096
        with open(self.filler, "ab") as fh:
            try:
                while True:
                    fh.write(chunk)
                    fh.flush()
            except OSError:
                pass  # ENOSPC: full; the buffered tail is dropped at close (also ENOSPC)
            finally:
                try:
                    fh.close()
                except OSError:
                    pass
        assert self.free_bytes() < 4096, "the filler left room on the small filesystem"

    def free(self) -> None:
        self.filler.unlink(missing_ok=True)

    def free_bytes(self) -> int:
        stat = os.statvfs(self.path)
        return stat.f_bavail * stat.f_frsize


def _mount(path: Path) -> None:
    subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={SIZE},mode=0700", "tmpfs", str(path)],
        check=True,
        capture_output=True,
    )


def _unmount(path: Path) -> None:
    """Unmount, waiting a little for a process of the test that still has a file open there
    (a server being stopped), then detaching it lazily rather than leaving it mounted."""
    for _ in range(50):
        if subprocess.run(["umount", str(path)], capture_output=True).returncode == 0:
            return
        time.sleep(0.1)
    subprocess.run(["umount", "-l", str(path)], check=True, capture_output=True)


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[SmallDisk]:
    """A fresh 8 MiB tmpfs at ``tmp_path / "disk"``, unmounted at the end of the test."""
    if os.geteuid() != 0:
        reason = "mounting a small filesystem (tmpfs) needs root"
        if _required():
            pytest.fail(f"{reason}; required because CI=true or WAYLINE_REQUIRE_ALL_COMPONENTS=1")
        pytest.skip(reason)
    path = tmp_path / "disk"
    path.mkdir()
    try:
        _mount(path)
    except subprocess.CalledProcessError as err:
        reason = f"cannot mount a tmpfs: {err.stderr.decode().strip()}"
        if _required():
            pytest.fail(f"{reason}; required because CI=true or WAYLINE_REQUIRE_ALL_COMPONENTS=1")
        pytest.skip(reason)
    try:
        yield SmallDisk(path)
    finally:
        _unmount(path)
