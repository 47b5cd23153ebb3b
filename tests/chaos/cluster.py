"""A three-node nats-server cluster whose routes run through toxiproxy, so that one node can
be partitioned from its peers while its clients still reach it.

Each node solicits every peer through a proxy of its own for that pair (``n0 -> n1`` is one
proxy, ``n1 -> n0`` another): a route between two nodes is one connection (or one pool of
connections) opened by either side, so cutting a node means disabling every proxy to and from
it. The nodes' client ports are not proxied, and no node advertises a route address its peers
could reach around the proxies.
"""

from __future__ import annotations

import json
import time
import urllib.request
from pathlib import Path

from tests.nats_fixtures import NatsServer
from tests.servers import free_port
from tests.toxiproxy import Proxy, Toxiproxy


class RoutedCluster:
    def __init__(self, binary: Path, store: Path, toxiproxy: Toxiproxy, size: int = 3) -> None:
        self.names = [f"n{i}" for i in range(size)]
        cluster_ports = {name: free_port() for name in self.names}
        self.monitor = {name: free_port() for name in self.names}
        self.routes: dict[tuple[str, str], Proxy] = {
            (a, b): toxiproxy.proxy(f"127.0.0.1:{cluster_ports[b]}", scheme="nats")
            for a in self.names
            for b in self.names
            if a != b
        }
        self.servers: dict[str, NatsServer] = {}
        for name in self.names:
            own = store / name
            own.mkdir()
            solicit = ",".join(p.url for (a, _), p in self.routes.items() if a == name)
            args = ["-n", name, "--cluster_name", "wayline-chaos", "-m", str(self.monitor[name])]
            args += ["--cluster", f"nats://127.0.0.1:{cluster_ports[name]}", "--routes", solicit]
            # A node tells its peers the route address of every node it knows, and a peer not
            # yet routed to that node connects there directly (an implicit route), around the
            # proxies: seen as n0 still routed to n2 after the cut. Port 1 refuses every
            # connection, so only the routes through the proxies are ever made.
            args += ["--cluster_advertise", "127.0.0.1:1"]
            self.servers[name] = NatsServer(binary, own, args=args)

    def url(self, name: str) -> str:
        return self.servers[name].url

    @property
    def urls(self) -> list[str]:
        return [s.url for s in self.servers.values()]

    def start(self, timeout: float = 30.0) -> None:
        for server in self.servers.values():
            server.start(timeout=timeout)
        deadline = time.monotonic() + timeout
        # JetStream answers only once the nodes have elected a metadata leader
        while not all(b"metadata leader" in s.log_path.read_bytes() for s in self.servers.values()):
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError("the nats-server cluster elected no JetStream leader")
            time.sleep(0.05)

    def stop(self) -> None:
        for server in self.servers.values():
            server.stop()

    def peers(self, name: str) -> set[str]:
        """The nodes ``name`` has a route to now, by its monitoring endpoint."""
        url = f"http://127.0.0.1:{self.monitor[name]}/routez"
        with urllib.request.urlopen(url, timeout=5) as answer:
            routez = json.loads(answer.read())
        return {str(r.get("remote_name") or r.get("remote_id")) for r in routez.get("routes") or []}

    def isolate(self, name: str) -> list[Proxy]:
        """Disable every route proxy to and from ``name``; the proxies to enable again."""
        cut = [p for (a, b), p in self.routes.items() if name in (a, b)]
        for proxy in cut:
            proxy.disable()
        return cut
