"""A real toxiproxy-server for network-fault tests (built by ``make toxiproxy-bins``, i.e.
``tools/build-toxiproxy.sh``, into a cache outside the repo).

The ``toxiproxy`` fixture starts one server per test session on a free loopback port; it dies
with the session (``dying_with_us``) and is stopped by its own pid. A test puts a proxy between
one client and a server (``toxiproxy.proxy(upstream)``) and cuts that link alone: the other
clients reach the server directly. The server is driven through its HTTP API with the standard
library. Without the binary the tests that need it are skipped, or fail when ``CI=true`` /
``WAYLINE_REQUIRE_ALL_COMPONENTS=1``.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.servers import dying_with_us, free_port

_SCRIPT = Path(__file__).resolve().parents[1] / "tools" / "build-toxiproxy.sh"


def default_binary() -> Path:
    """Where tools/build-toxiproxy.sh puts the server: ``$WAYLINE_TOXIPROXY_BIN`` (the cache
    root) or ``~/.cache/wayline/toxiproxy``, then the version the script pins (read from it, so
    the two cannot disagree)."""
    found = re.search(r"^TOXIPROXY_VERSION=(\S+)$", _SCRIPT.read_text(), re.MULTILINE)
    assert found is not None, f"{_SCRIPT} pins no TOXIPROXY_VERSION"
    root = os.environ.get("WAYLINE_TOXIPROXY_BIN") or Path.home() / ".cache/wayline/toxiproxy"
    return Path(root) / found[1] / "toxiproxy-server"


class Proxy:
    """One proxy of the server: clients connect to ``url``, which forwards to its upstream
    while the link is up."""

    def __init__(self, api: Toxiproxy, name: str, listen: str, scheme: str) -> None:
        self.api, self.name, self.listen = api, name, listen
        self.url = f"{scheme}://{listen}"

    def disable(self) -> None:
        """Cut the link: open connections are closed and new ones refused."""
        self.api.call("POST", f"/proxies/{self.name}", {"enabled": False})

    def enable(self) -> None:
        self.api.call("POST", f"/proxies/{self.name}", {"enabled": True})

    def add_toxic(
        self, name: str, kind: str, stream: str = "downstream", **attributes: Any
    ) -> None:
        """Add a toxic (``timeout`` with ``timeout=0`` holds every byte, a blackhole;
        ``reset_peer`` resets connections), on the ``downstream`` or ``upstream`` stream."""
        body = {"name": name, "type": kind, "stream": stream, "toxicity": 1.0}
        self.api.call("POST", f"/proxies/{self.name}/toxics", {**body, "attributes": attributes})

    def remove_toxic(self, name: str) -> None:
        self.api.call("DELETE", f"/proxies/{self.name}/toxics/{name}")


class Toxiproxy:
    """One toxiproxy-server process we started; stopped only by its own pid."""

    def __init__(self, binary: Path, log_path: Path) -> None:
        self.binary, self.log_path = binary, log_path
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self._proxies = 0

    def start(self, timeout: float = 10.0) -> None:
        args = [str(self.binary), "-host", "127.0.0.1", "-port", str(self.port)]
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(dying_with_us(args), stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"toxiproxy-server exited at start: {self.log_path.read_text()}")
            try:
                self.call("GET", "/version")
                return
            except OSError:
                time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"toxiproxy-server did not answer on 127.0.0.1:{self.port}")

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None:
            return
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()

    def call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        """One request to the API; an answer other than 2xx raises with the server's words."""
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.port}{path}",
            data=data,
            method=method,
            headers={"Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=5) as answer:
                text = answer.read()
        except urllib.error.HTTPError as err:
            raise RuntimeError(f"toxiproxy {method} {path}: {err.code} {err.read()!r}") from None
        return json.loads(text) if text.strip().startswith((b"{", b"[")) else text

    def proxy(self, upstream: str, scheme: str = "nats") -> Proxy:
        """A new proxy on a free loopback port to ``upstream`` (``host:port`` or a URL)."""
        self._proxies += 1
        name = f"p{self._proxies}"
        target = upstream.split("://", 1)[-1]
        made = self.call(
            "POST",
            "/proxies",
            {"name": name, "listen": "127.0.0.1:0", "upstream": target, "enabled": True},
        )
        return Proxy(self, name, str(made["listen"]), scheme)


def _required() -> bool:
    return os.environ.get("WAYLINE_REQUIRE_ALL_COMPONENTS") == "1" or os.environ.get("CI") == "true"


@pytest.fixture(scope="session")
def toxiproxy() -> Iterator[Toxiproxy]:
    """The session's toxiproxy-server."""
    binary = default_binary()
    if not binary.is_file():
        reason = f"toxiproxy-server not in {binary.parent}: run `make toxiproxy-bins`"
        if _required():
            pytest.fail(f"{reason}; required because CI=true or WAYLINE_REQUIRE_ALL_COMPONENTS=1")
        pytest.skip(reason)
    with tempfile.TemporaryDirectory(prefix="wayline-toxiproxy-") as tmp:
        server = Toxiproxy(binary, Path(tmp) / "toxiproxy.log")
        server.start()
        try:
            yield server
        finally:
            server.stop()
