"""``wayline worker --health-port``: the probe endpoints the chart's worker pods use."""

from __future__ import annotations

import socket
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


def test_a_worker_waits_for_a_world_that_is_not_up_yet(
    cli: Any, spawn: Any, nats_server_own: Any
) -> None:
    """A worker pod can start before its NATS: it tries again (not exit 2, which a pod would
    count as a crash) and serves once the server is up."""
    nats_server_own.stop()
    cli.world = nats_server_own.url
    worker = spawn("worker", "--app", str(FLOWS), "--processes", "1")
    worker.wait_for("not reachable yet", timeout=30)
    assert worker.proc.poll() is None
    nats_server_own.start()
    worker.wait_for("ready on", timeout=60)
    started = cli.here("start", f"{FLOWS}:add", "--input", "[2, 3]")
    assert started.returncode == 0, started.stderr
    assert worker.stop() == 0


def test_a_port_in_use_is_one_line_and_exit_2_not_a_traceback_or_restarts(cli: Any) -> None:
    """A taken --health-port or --metrics-port: the worker says which and exits 2, with one
    process or several (the supervisor checks before it starts any, and would not restart a
    child that exits 2)."""
    from tests.cli.test_cli import assert_clean_error

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        for flag, host in (
            ("--health-port", "--health-host"),
            ("--metrics-port", "--metrics-host"),
        ):
            for processes in ("1", "2"):
                done = cli(
                    *("worker", "--app", str(FLOWS), flag, port, host, "127.0.0.1"),
                    *("--processes", processes),
                    timeout=60,
                )
                assert_clean_error(done, flag, f"127.0.0.1:{port} (")
