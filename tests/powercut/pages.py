"""What a file holds that its last fsync did not: the pages written since then and the size,
kept over the file's synced bytes as a disk's volatile cache keeps them over its platters.

Pure bookkeeping on a file descriptor of the backing file: ``read`` serves the merged view,
``sync`` writes it through and fsyncs the backing file, and dropping the object is the power
cut (nothing written since the last ``sync`` reaches the backing file)."""

from __future__ import annotations

import os

PAGE = 4096


class Pending:
    """The unsynced state of one file (one backing inode)."""

    def __init__(self, synced_size: int) -> None:
        self.size = synced_size
        # The backing bytes at or past ``floor`` are hidden: a truncate since the last sync cut
        # them off, and a later extension must read zeros there, not the old bytes.
        self.floor = synced_size
        self.pages: dict[int, bytearray] = {}

    @property
    def clean(self) -> bool:
        return not self.pages and self.floor == self.size

    def _backing(self, fd: int, offset: int, length: int) -> bytes:
        length = max(0, min(length, self.floor - offset))
        return os.pread(fd, length, offset) if length else b""

    def _page(self, fd: int, index: int) -> bytearray:
        page = self.pages.get(index)
        if page is None:
            page = bytearray(PAGE)
            old = self._backing(fd, index * PAGE, PAGE)
            page[: len(old)] = old
            self.pages[index] = page
        return page

    def read(self, fd: int, size: int, offset: int) -> bytes:
        end = min(offset + size, self.size)
        if end <= offset:
            return b""
        out = bytearray(end - offset)
        old = self._backing(fd, offset, end - offset)
        out[: len(old)] = old
        for index in range(offset // PAGE, (end - 1) // PAGE + 1):
            page = self.pages.get(index)
            if page is None:
                continue
            start = max(offset, index * PAGE)
            stop = min(end, (index + 1) * PAGE)
            out[start - offset : stop - offset] = page[start - index * PAGE : stop - index * PAGE]
        return bytes(out)

    def write(self, fd: int, data: bytes, offset: int) -> int:
        pos = 0
        while pos < len(data):
            index, within = divmod(offset + pos, PAGE)
            take = min(PAGE - within, len(data) - pos)
            self._page(fd, index)[within : within + take] = data[pos : pos + take]
            pos += take
        self.size = max(self.size, offset + len(data))
        return len(data)

    def truncate(self, fd: int, length: int) -> None:
        if length < self.size:
            for index in [i for i in self.pages if i * PAGE >= length]:
                del self.pages[index]
            within = length % PAGE
            if within:  # the bytes past the end of the last page read as zeros if regrown
                page = self._page(fd, length // PAGE)
                page[within:] = bytes(PAGE - within)
            self.floor = min(self.floor, length)
        self.size = length

    def sync(self, fd: int) -> None:
        """Write the merged view through and fsync it: the backing file is then exactly what a
        reader of the mount sees."""
        os.ftruncate(fd, self.floor)
        for index in sorted(self.pages):
            start = index * PAGE
            if start < self.size:
                os.pwrite(fd, bytes(self.pages[index][: min(PAGE, self.size - start)]), start)
        os.ftruncate(fd, self.size)
        os.fsync(fd)
        self.pages.clear()
        self.floor = self.size
