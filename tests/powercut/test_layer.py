"""The power-loss layer itself: what was fsynced survives a cut, what was not is gone."""

from __future__ import annotations

import os
from collections.abc import Callable

from tests.powercut.mount import LazyMount, mounted


def test_a_cut_keeps_exactly_what_was_fsynced(lazy_mount: Callable[[str], LazyMount]) -> None:
    disk = lazy_mount("store")
    synced, lost, shrunk = disk.mount / "synced", disk.mount / "lost", disk.mount / "shrunk"
    fd = os.open(synced, os.O_RDWR | os.O_CREAT)
    os.write(fd, b"kept " * 2000)
    os.fsync(fd)
    os.write(fd, b"gone")
    assert os.pread(fd, 4, 10000) == b"gone"  # the writer reads its unsynced bytes
    os.close(fd)
    lost.write_bytes(b"never synced")
    with open(shrunk, "wb") as fh:
        fh.write(b"x" * 9000)
        os.fdatasync(fh.fileno())
        fh.truncate(10)
    assert shrunk.stat().st_size == 10
    fd = os.open(disk.mount / "osync", os.O_WRONLY | os.O_CREAT | os.O_DSYNC)
    os.write(fd, b"written through")
    os.close(fd)
    disk.cut()
    assert not mounted(disk.mount)
    assert (disk.backing / "synced").read_bytes() == b"kept " * 2000
    assert (disk.backing / "lost").read_bytes() == b""
    assert (disk.backing / "shrunk").read_bytes() == b"x" * 9000
    assert (disk.backing / "osync").read_bytes() == b"written through"


def test_a_file_cut_short_and_grown_again_reads_zeros_where_it_was_cut(
    lazy_mount: Callable[[str], LazyMount],
) -> None:
    disk = lazy_mount("store")
    path = disk.mount / "regrown"
    with open(path, "wb") as fh:
        fh.write(b"x" * 9000)
        os.fsync(fh.fileno())
        fh.truncate(10)
        fh.seek(6000)
        fh.write(b"end")
        fh.flush()
        expected = b"x" * 10 + bytes(5990) + b"end"
        assert path.read_bytes() == expected  # before the sync, through the layer
        os.fsync(fh.fileno())
    disk.cut()
    assert (disk.backing / "regrown").read_bytes() == expected
