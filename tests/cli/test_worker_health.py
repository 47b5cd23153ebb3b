"""``wayline worker --health-port``: the probe endpoints the chart's worker pods use."""

from __future__ import annotations

from typing import Any

from tests.cli.conftest import FLOWS
from tests.runtime.test_health import _get
from tests.servers import free_port


def test_the_worker_command_serves_the_probes(cli: Any, spawn: Any) -> None:
    port = free_port()
    # one process: with several, "ready on" may come from a child that does not serve the
    # probes (test_supervisor covers that case)
    worker = spawn("worker", "--app", str(FLOWS), "--health-port", str(port), "--processes", "1")
    worker.wait_for("ready on")
    assert _get(port, "/readyz") == (200, "ok\n")
    assert _get(port, "/healthz") == (200, "ok\n")
    assert worker.stop() == 0
