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

    def start(db: Path, **env: str) -> subprocess.Popen[bytes]:
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
