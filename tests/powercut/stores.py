"""The stores a power cut is tried on, each living on power-loss mounts: a SQLite file (the
world URL chooses its ``sync``), or nats-servers, one or a cluster of three, each with its
JetStream directory on a mount of its own (the config chooses ``sync_interval``)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from tests.nats_fixtures import require_nats
from tests.servers import dying_with_us


def free_ports(n: int) -> list[int]:
    """``n`` distinct free loopback ports: each is held until all are found, since a port
    given back at once may be given again to the next asker."""
    held = [socket.socket() for _ in range(n)]
    try:
        for s in held:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in held]
    finally:
        for s in held:
            s.close()


class SqliteStore:
    def __init__(self, mount: Path, query: str) -> None:
        self.target = f"sqlite:///{mount / 'w.db'}{query}"

    def start(self) -> None:
        pass  # the file is opened by each process

    def kill(self) -> None:
        pass


class NatsNode:
    """One nats-server on fixed ports (the URL survives its restarts), its store on ``mount``,
    its log beside the mount, stopped only by its own pid."""

    def __init__(self, name: str, mount: Path, sync_always: bool, ports: list[int]) -> None:
        self.binary = require_nats()
        self.name = name
        self.port, self.route, self.http = ports
        self.config = mount.parent / f"{name}.conf"
        self.log = mount.parent / f"{name}.log"
        self.sync = "sync_interval: always" if sync_always else ""
        self.store = mount / "js"
        self.proc: subprocess.Popen[bytes] | None = None
        self.clustered = False

    def write_config(self, routes: list[int]) -> None:
        cluster = ""
        self.clustered = bool(routes)
        if routes:
            listed = ", ".join(f'"nats://127.0.0.1:{r}"' for r in routes)
            cluster = (
                f'cluster {{ name: "pc", listen: "127.0.0.1:{self.route}", routes: [{listed}] }}'
            )
        self.config.write_text(
            f'server_name: "{self.name}"\nlisten: "127.0.0.1:{self.port}"\n'
            f'http: "127.0.0.1:{self.http}"\n'
            f'jetstream {{ store_dir: "{self.store}"\n {self.sync} }}\n{cluster}\n'
        )

    def start(self) -> None:
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(
                dying_with_us([str(self.binary), "-c", str(self.config)]), stderr=log, stdout=log
            )

    def healthy(self) -> bool:
        """JetStream answers here: the server is up and, in a cluster, knows a meta leader.
        A stream the cut broke is not waited for (``js-server-only``): the world finds it so."""
        assert self.proc is not None
        if self.proc.poll() is not None:
            raise RuntimeError(f"nats-server {self.name} exited: {self.log.read_text()[-2000:]}")
        health = self.monitor("healthz?js-server-only=true")
        if health is None or health.get("status") != "ok":
            return False
        if not self.clustered:
            return True
        jsz = self.monitor("jsz")
        return bool(jsz and (jsz.get("meta_cluster") or {}).get("leader"))

    def monitor(self, path: str) -> dict[str, Any] | None:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.http}/{path}", timeout=2) as r:
                answer: dict[str, Any] = json.load(r)
                return answer
        except (urllib.error.URLError, OSError, ValueError):
            return None

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)

    def pause(self) -> None:
        assert self.proc is not None
        os.kill(self.proc.pid, signal.SIGSTOP)

    def resume(self) -> None:
        assert self.proc is not None
        os.kill(self.proc.pid, signal.SIGCONT)


class NatsStore:
    """nats-servers on the given mounts: one alone, or a cluster whose world keeps three
    replicas of every stream."""

    def __init__(self, mounts: list[Path], sync_always: bool) -> None:
        ports = free_ports(3 * len(mounts))
        self.nodes = [
            NatsNode(f"n{i}", m, sync_always, ports[3 * i : 3 * i + 3])
            for i, m in enumerate(mounts)
        ]
        routes = [n.route for n in self.nodes] if len(self.nodes) > 1 else []
        for node in self.nodes:
            node.write_config(routes)
        self.target = ",".join(f"nats://127.0.0.1:{n.port}" for n in self.nodes)
        if len(self.nodes) > 1:
            self.target += f"?replicas={len(self.nodes)}"

    def start(self, timeout: float = 40.0) -> None:
        for node in self.nodes:
            if node.proc is None or node.proc.poll() is not None:
                node.start()
        self.wait_healthy(timeout)
        if len(self.nodes) > 1:
            # A meta leader is not enough to place a stream of three replicas: the leader must
            # also see every other node as a current peer, or a stream the cut lost cannot be
            # created again ("no suitable peers for placement"). Waited for a while, as below.
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline and not any(
                self._sees_every_peer(node) for node in self.nodes
            ):
                time.sleep(0.2)
            # Then, for a while, until every stream and consumer has its leader again (a
            # stream the cut broke never gets one: the world then finds it so).
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline and not all(
                (node.monitor("healthz") or {}).get("status") == "ok" for node in self.nodes
            ):
                time.sleep(0.2)

    def _sees_every_peer(self, node: NatsNode) -> bool:
        """``node`` leads the meta group and counts every other node as a current peer."""
        meta = (node.monitor("jsz") or {}).get("meta_cluster") or {}
        if meta.get("leader") != node.name:
            return False
        peers = [p for p in meta.get("replicas") or [] if p.get("current")]
        return len(peers) >= len(self.nodes) - 1

    def wait_healthy(self, timeout: float = 40.0) -> None:
        deadline = time.monotonic() + timeout
        while not all(node.healthy() for node in self.nodes):
            if time.monotonic() > deadline:
                logs = "\n".join(n.log.read_text()[-1500:] for n in self.nodes)
                raise RuntimeError(f"nats-servers not healthy in {timeout} s: {logs}")
            time.sleep(0.1)

    def leader(self, stream: str) -> str:
        """The name of ``stream``'s leader, from a node's monitoring endpoint."""
        for node in self.nodes:
            jsz = node.monitor("jsz?accounts=true&streams=true") or {}
            for account in jsz.get("account_details") or []:
                for detail in account.get("stream_detail") or []:
                    if detail.get("name") == stream and detail.get("cluster", {}).get("leader"):
                        return str(detail["cluster"]["leader"])
        raise RuntimeError(f"no node names a leader of {stream}")

    def kill(self) -> None:
        for node in self.nodes:
            node.kill()
