"""A passthrough FUSE filesystem that loses, on a power cut, every write not yet fsynced:
``python -m tests.powercut.lazyfs BACKING MOUNT [TRACE]``.

Writes to a file are kept in memory (``pages.Pending``) over the backing file's synced bytes
until the file is fsynced or fdatasynced (or written through a descriptor opened with
``O_SYNC``/``O_DSYNC``); only then do they reach the backing directory, with an fsync there.
So the backing directory always holds exactly what a disk would have kept, and killing this
process (then unmounting) is the power cut: what was only in its memory is gone, as it would
be from a disk's cache. Directory entries (create, rename, unlink) reach the backing directory
at once, as if every directory were fsynced; one exception models ext4's ``auto_da_alloc``:
a rename over an existing file first writes the renamed file's data through, as ext4 does for
the write-temporary-then-rename idiom.

With TRACE, one line per event that decides durability (``fsync PATH``, ``osync PATH``,
``open-sync PATH``, ``rename-sync PATH``) is appended there, so a test can show how a store
really writes. The loop is single-threaded: no operation blocks, and one thread needs no
locks around the page maps."""

from __future__ import annotations

import errno
import os
import stat
import sys
from typing import Any

import mfusepy

from tests.powercut.pages import Pending

_SYNC_FLAGS = os.O_SYNC | os.O_DSYNC


class LazyFS(mfusepy.Operations):  # type: ignore[misc]
    use_ns = True

    def __init__(self, backing: str, trace: str | None) -> None:
        self.root = os.path.realpath(backing)
        self.pending: dict[tuple[int, int], Pending] = {}
        self.opened: dict[tuple[int, int], int] = {}  # open handles per inode
        self.sync_handles: set[int] = set()
        self.trace = open(trace, "a", buffering=1) if trace else None  # noqa: SIM115

    # helpers ----------------------------------------------------------------------------
    def _real(self, path: str) -> str:
        return os.path.join(self.root, path.lstrip("/"))

    def _note(self, what: str, path: str) -> None:
        if self.trace is not None:
            self.trace.write(f"{what} {path}\n")

    @staticmethod
    def _key(st: os.stat_result) -> tuple[int, int]:
        return (st.st_dev, st.st_ino)

    def _state(self, fd: int) -> Pending:
        st = os.fstat(fd)
        key = self._key(st)
        state = self.pending.get(key)
        if state is None:
            state = self.pending[key] = Pending(st.st_size)
        return state

    def _sync_path(self, real: str) -> None:
        st = os.lstat(real)
        state = self.pending.get(self._key(st))
        if state is None or not stat.S_ISREG(st.st_mode):
            return
        fd = os.open(real, os.O_RDWR)
        try:
            state.sync(fd)
        finally:
            os.close(fd)

    # attributes and directories -----------------------------------------------------------
    def getattr(self, path: str, fh: int | None = None) -> dict[str, Any]:
        try:
            st = os.lstat(self._real(path))
        except OSError as err:
            raise mfusepy.FuseOSError(err.errno) from None
        attrs = {
            key: getattr(st, key)
            for key in (
                "st_mode", "st_nlink", "st_uid", "st_gid", "st_size", "st_blocks", "st_rdev"
            )
        }  # fmt: skip
        attrs["st_atime"] = st.st_atime_ns
        attrs["st_mtime"] = st.st_mtime_ns
        attrs["st_ctime"] = st.st_ctime_ns
        state = self.pending.get(self._key(st))
        if state is not None and stat.S_ISREG(st.st_mode):
            attrs["st_size"] = state.size
        return attrs

    def readdir(self, path: str, fh: int) -> list[str]:
        return [".", "..", *os.listdir(self._real(path))]

    def access(self, path: str, amode: int) -> int:
        if not os.access(self._real(path), amode):
            raise mfusepy.FuseOSError(errno.EACCES)
        return 0

    def mkdir(self, path: str, mode: int) -> int:
        os.mkdir(self._real(path), mode)
        return 0

    def rmdir(self, path: str) -> int:
        os.rmdir(self._real(path))
        return 0

    def chmod(self, path: str, mode: int) -> int:
        os.chmod(self._real(path), mode)
        return 0

    def chown(self, path: str, uid: int, gid: int) -> int:
        os.chown(self._real(path), uid, gid)
        return 0

    def utimens(self, path: str, times: tuple[int, int] | None = None) -> int:
        os.utime(self._real(path), ns=times)
        return 0

    def statfs(self, path: str) -> dict[str, Any]:
        sv = os.statvfs(self._real(path))
        keys = ("f_bavail", "f_bfree", "f_blocks", "f_bsize", "f_favail", "f_ffree", "f_files")
        return {key: getattr(sv, key) for key in (*keys, "f_flag", "f_frsize", "f_namemax")}

    def unlink(self, path: str) -> int:
        real = self._real(path)
        st = os.lstat(real)
        os.unlink(real)
        key = self._key(st)
        if st.st_nlink <= 1 and not self.opened.get(key):
            self.pending.pop(key, None)  # the inode number may be reused by a new file
        return 0

    def rename(self, old: str, new: str) -> int:
        target = self._real(new)
        if os.path.lexists(target):
            self._note("rename-sync", old)
            self._sync_path(self._real(old))
            replaced = os.lstat(target)
            if replaced.st_nlink <= 1 and not self.opened.get(self._key(replaced)):
                self.pending.pop(self._key(replaced), None)
        os.rename(self._real(old), target)
        return 0

    # files --------------------------------------------------------------------------------
    def _opened(self, fd: int, flags: int, path: str) -> int:
        key = self._key(os.fstat(fd))
        self.opened[key] = self.opened.get(key, 0) + 1
        if flags & _SYNC_FLAGS:
            self._note("open-sync", path)
            self.sync_handles.add(fd)
        return fd

    def open(self, path: str, flags: int) -> int:
        # Read-write whatever the caller asked: the page map reads the synced bytes under a
        # write, and the caller's own access was checked by the kernel already.
        return self._opened(os.open(self._real(path), os.O_RDWR), flags, path)

    def create(self, path: str, mode: int, flags: int) -> int:
        fd = os.open(self._real(path), os.O_RDWR | os.O_CREAT | (flags & os.O_EXCL), mode)
        return self._opened(fd, flags, path)

    def read(self, path: str, size: int, offset: int, fh: int) -> bytes:
        return self._state(fh).read(fh, size, offset)

    def write(self, path: str, data: bytes, offset: int, fh: int) -> int:
        state = self._state(fh)
        written = state.write(fh, data, offset)
        if fh in self.sync_handles:
            self._note("osync", path)
            state.sync(fh)
        return written

    def truncate(self, path: str, length: int, fh: int | None = None) -> int:
        fd = os.open(self._real(path), os.O_RDWR)
        try:
            self._state(fd).truncate(fd, length)
        finally:
            os.close(fd)
        return 0

    def fsync(self, path: str, datasync: int, fh: int) -> int:
        self._note("fdatasync" if datasync else "fsync", path)
        self._state(fh).sync(fh)
        return 0

    def fsyncdir(self, path: str, datasync: int, fh: int) -> int:
        return 0  # directory entries reach the backing directory at once (see the docstring)

    def flush(self, path: str, fh: int) -> int:
        return 0  # a close is not a sync

    def release(self, path: str, fh: int) -> int:
        st = os.fstat(fh)
        key = self._key(st)
        self.opened[key] -= 1
        if not self.opened[key]:
            del self.opened[key]
            if st.st_nlink == 0:
                self.pending.pop(key, None)
        self.sync_handles.discard(fh)
        os.close(fh)
        return 0


def main() -> None:
    backing, mount = sys.argv[1], sys.argv[2]
    trace = sys.argv[3] if len(sys.argv) > 3 else None
    mfusepy.FUSE(LazyFS(backing, trace), mount, foreground=True, nothreads=True, fsname="lazyfs")


if __name__ == "__main__":
    main()
