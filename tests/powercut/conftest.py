"""The power-loss filesystem as a fixture: ``lazy_mount()`` mounts one over a fresh backing
directory; teardown unmounts every one, whatever the test did."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.powercut.mount import LazyMount, fuse_missing, mounted


@pytest.fixture
def lazy_mount(tmp_path: Path) -> Iterator[Callable[[str], LazyMount]]:
    missing = fuse_missing()
    if missing is not None:
        required = os.environ.get("WAYLINE_REQUIRE_ALL_COMPONENTS") == "1"
        if required or os.environ.get("CI") == "true":
            pytest.fail(f"power-cut tests need FUSE: {missing}")
        pytest.skip(f"power-cut tests need FUSE: {missing}")
    mounts: list[LazyMount] = []

    def make(name: str = "store") -> LazyMount:
        mount = LazyMount(tmp_path / f"{name}.disk", tmp_path / name, tmp_path / f"{name}.trace")
        mounts.append(mount)
        mount.start()
        return mount

    yield make
    for mount in mounts:
        mount.close()
    assert not any(mounted(m.mount) for m in mounts)
