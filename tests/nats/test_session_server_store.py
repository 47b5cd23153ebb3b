"""Where the test servers keep their stores (docs/testing.md, "The session nats-server's store
in memory"): the session server's store, thrown away with its directory, lives in memory where
the machine has it; a server a test restarts or crashes keeps its store on disk."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.nats_fixtures import (
    MEMORY_STORE_ROOT,
    OWNERS,
    STORE_PREFIX,
    NatsServer,
    _server,
    _store_root,
    sweep_dead_stores,
)
from wayline.worlds.local.holders import HOST, current_holder, holder_of


def test_the_session_servers_store_is_in_memory_where_the_machine_has_some(
    nats_server: NatsServer,
) -> None:
    if not MEMORY_STORE_ROOT.is_dir():
        pytest.skip(f"this machine has no {MEMORY_STORE_ROOT}")
    assert nats_server.store.is_relative_to(MEMORY_STORE_ROOT), nats_server.store
    assert nats_server.running


def test_a_store_that_must_outlive_its_server_stays_on_disk() -> None:
    assert _store_root(discard=False) is None


def _gone(pid: int) -> bool:
    return not Path(f"/proc/{pid}").exists()


def test_a_store_left_by_a_killed_test_process_is_removed_by_the_next_session() -> None:
    """A test process killed with SIGKILL runs no teardown: its server dies with it, but its
    store stays in memory. The next session's server removes it before making its own."""
    if not MEMORY_STORE_ROOT.is_dir() or _store_root(discard=True) is None:
        pytest.skip(f"this machine keeps no session store in {MEMORY_STORE_ROOT}")
    script = (
        "import sys, time\n"
        "from tests.nats_fixtures import _server\n"
        "session = _server(discard=True)\n"
        "server = next(session)\n"
        "print(server.store, server.proc.pid, flush=True)\n"
        "time.sleep(120)\n"
    )
    root = Path(__file__).parents[2]
    child = subprocess.Popen(
        [sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, cwd=root
    )
    try:
        assert child.stdout is not None
        store_text, server_pid = child.stdout.readline().split()
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
        if child.stdout is not None:
            child.stdout.close()
    store = Path(store_text)
    deadline = time.monotonic() + 15
    while not _gone(int(server_pid)):  # the server dies with its parent (setpriv --pdeathsig)
        assert time.monotonic() < deadline, f"nats-server {server_pid} outlived its test process"
        time.sleep(0.05)
    assert store.is_dir()  # left behind
    try:
        session = _server(discard=True)
        server = next(session)
        assert server.running
        session.close()
        assert not store.exists(), f"{store} was left in memory"
    finally:
        shutil.rmtree(store, ignore_errors=True)


def _owned(root: Path, name: str, *owners: str) -> Path:
    store = root / f"{STORE_PREFIX}{name}"
    (store / "js").mkdir(parents=True)
    if owners:
        (store / OWNERS).write_text("".join(f"{o}\n" for o in owners))
    return store


def test_only_stores_whose_processes_are_all_gone_are_swept(tmp_path: Path) -> None:
    """Never a live one: a store is swept only when it names its processes and none of them
    runs any more (a pid given to a later process does not count: its start time differs)."""
    ended = subprocess.Popen([sys.executable, "-c", "pass"])
    ended.wait()
    dead = holder_of(ended.pid)
    me = current_holder()
    reused = f"{HOST}:{os.getpid()}:1"  # our pid, but a process that started at another time
    swept = _owned(tmp_path, "swept", dead, dead)
    swept_reused = _owned(tmp_path, "reused", reused)
    live = _owned(tmp_path, "live", me)
    live_server = _owned(tmp_path, "liveserver", dead, me)  # the test process died, not the server
    unclaimed = _owned(tmp_path, "unclaimed")  # just made by a session that has not written yet
    garbled = _owned(tmp_path, "garbled", "not a pid")
    half_written = _owned(tmp_path, "half")
    (half_written / OWNERS).write_text(dead[:-1])  # no newline yet: its writer is still at it
    other = tmp_path / "something-else"
    other.mkdir()
    assert sorted(sweep_dead_stores(tmp_path)) == sorted([swept, swept_reused])
    assert not swept.exists() and not swept_reused.exists()
    assert all(p.is_dir() for p in (live, live_server, unclaimed, garbled, half_written, other))


def test_a_small_or_full_memory_store_falls_back_to_disk(monkeypatch: pytest.MonkeyPatch) -> None:
    """nats-server sizes its file store from the space free where it starts: in a small or
    full /dev/shm the session server would refuse streams mid-test, so its store goes to disk."""
    if not MEMORY_STORE_ROOT.is_dir():
        pytest.skip(f"this machine has no {MEMORY_STORE_ROOT}")
    full = shutil._ntuple_diskusage(64 << 20, 64 << 20, 0)  # type: ignore[attr-defined]
    monkeypatch.setattr(shutil, "disk_usage", lambda path: full)
    assert _store_root(discard=True) is None
