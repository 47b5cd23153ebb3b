"""Worker processes for fault tests, started with the pod's own kind of command and stopped
by their pid."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def spawn_worker(tmp_path: Path) -> Iterator[object]:
    procs: list[subprocess.Popen[bytes]] = []
    logs: list[object] = []

    def start(db: Path | str, **env: str) -> subprocess.Popen[bytes]:
        log = open(tmp_path / f"worker-{len(procs)}.log", "wb")  # noqa: SIM115
        logs.append(log)
        proc = subprocess.Popen(
            [sys.executable, "-m", "tests.faults.worker_main", str(db)],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=log,
            env={**os.environ, **env},
        )
        procs.append(proc)
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == b"worker ready"
        return proc

    yield start
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=10)
        if proc.stdout:
            proc.stdout.close()
    for log in logs:
        log.close()  # type: ignore[attr-defined]


class CrashWorld:
    """Where a fault test's worker processes and its own client meet."""

    def __init__(self, arg: str, env: dict[str, str], opener: object) -> None:
        self.arg = arg
        self.env = env
        self._opener = opener

    def open(self) -> object:
        return self._opener()  # type: ignore[operator]


@pytest.fixture(params=["local", "nats"])
def crash_world(request: pytest.FixtureRequest, tmp_path: Path) -> CrashWorld:
    """A world for SIGKILL tests on each kind: a SQLite file (a dead holder's messages come back
    at once), or JetStream with a 2 s ack wait (a dead consumer's delivery comes back then)."""
    import uuid

    import wayline

    if request.param == "local":
        db = tmp_path / "w.db"
        return CrashWorld(str(db), {}, lambda: wayline.LocalWorld(db))
    server = request.getfixturevalue("nats_server")
    from wayline.worlds.nats import NatsWorld

    prefix = "f" + uuid.uuid4().hex[:10]
    env = {"WAYLINE_TEST_PREFIX": prefix, "WAYLINE_VISIBILITY_SECONDS": "2"}
    return CrashWorld(server.url, env, lambda: NatsWorld(server.url, prefix=prefix))
