"""Worker processes for fault tests, started with the pod's own kind of command and stopped
by their pid. Each is forked from the test process's CLI zygote (tests/operator/zygote.py,
``cli_zygote``), which imported ``wayline`` and both worlds once: a process of its own (its
own pid, SIGKILL kills it, its exit status is its own, its stdout a pipe the test reads), with
the environment the test gives it; an environment a forked child would not have
(``forkable``), or ``WAYLINE_TEST_ZYGOTE=0``, starts a new interpreter instead."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.operator.zygote import Forked, cli_zygote_for

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def spawn_worker(tmp_path: Path) -> Iterator[object]:
    procs: list[subprocess.Popen[bytes] | Forked] = []

    def start(db: Path | str, **env: str) -> subprocess.Popen[bytes] | Forked:
        log = tmp_path / f"worker-{len(procs)}.log"
        argv = [sys.executable, "-m", "tests.faults.worker_main", str(db)]
        full = {**os.environ, **env}
        zygote = cli_zygote_for(full, argv)
        proc: subprocess.Popen[bytes] | Forked
        if zygote is not None:
            proc = zygote.spawn(argv, full, log, cwd=ROOT, pipe_stdout=True)
        else:
            with log.open("wb") as err:
                proc = subprocess.Popen(
                    argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=err, env=full
                )
        procs.append(proc)
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == b"worker ready", log.read_text()
        return proc

    yield start
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=10)
        if proc.stdout:
            proc.stdout.close()


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
