"""The stores a power cut is tried on, each living on the power-loss mount: a SQLite file (the
world URL chooses its ``sync``) or one nats-server whose JetStream directory is there (its
config chooses ``sync_interval``)."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

from tests.nats_fixtures import require_nats
from tests.servers import dying_with_us, free_port


class SqliteStore:
    def __init__(self, mount: Path, query: str) -> None:
        self.target = f"sqlite:///{mount / 'w.db'}{query}"

    def start(self) -> None:
        pass  # the file is opened by each process

    def kill(self) -> None:
        pass


class NatsStore:
    """One nats-server on a fixed port (the URL survives its restarts), its store on the
    mount, its log beside the mount."""

    def __init__(self, mount: Path, sync_always: bool) -> None:
        self.binary = require_nats()
        self.port = free_port()
        self.target = f"nats://127.0.0.1:{self.port}"
        self.config = mount.parent / "nats.conf"
        sync = "sync_interval: always" if sync_always else ""
        self.config.write_text(
            f'listen: "127.0.0.1:{self.port}"\n'
            f'jetstream {{ store_dir: "{mount / "js"}"\n {sync} }}\n'
        )
        self.log = mount.parent / "nats.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 20.0) -> None:
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(
                dying_with_us([str(self.binary), "-c", str(self.config)]), stderr=log, stdout=log
            )
        deadline = time.monotonic() + timeout
        while "Server is ready" not in self.log.read_text(errors="replace").split("---cut---")[-1]:
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"nats-server did not start: {self.log.read_text()[-2000:]}")
            time.sleep(0.05)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)
        with open(self.log, "a") as log:
            log.write("---cut---\n")
