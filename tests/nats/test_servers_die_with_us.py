"""A test run killed mid-way (a CI timeout, SIGTERM to pytest, which runs no fixture teardown)
leaves no server behind: the servers the tests start get the kernel's parent-death signal
(``tests.servers.dying_with_us``). Proven with a real nats-server started by a child process
that is then SIGKILLed."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.nats_fixtures import _required, require_nats


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


def test_a_nats_server_dies_with_the_test_process_that_started_it(tmp_path: Path) -> None:
    require_nats()
    if not sys.platform.startswith("linux") or shutil.which("setpriv") is None:
        reason = "no parent-death signal here: needs Linux and util-linux's setpriv"
        if _required():
            pytest.fail(f"{reason}; required because CI=true or WAYLINE_REQUIRE_ALL_COMPONENTS=1")
        pytest.skip(reason)
    code = (
        "import sys, time\n"
        "from pathlib import Path\n"
        "from tests.nats_fixtures import NATS_SERVER, NatsServer\n"
        f"server = NatsServer(NATS_SERVER, Path({str(tmp_path)!r}))\n"
        "server.start()\n"
        "print(server.proc.pid, flush=True)\n"
        "time.sleep(600)\n"
    )
    root = Path(__file__).resolve().parents[2]
    child = subprocess.Popen(
        [sys.executable, "-c", code], cwd=root, stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout is not None
        server_pid = int(child.stdout.readline())
        assert _alive(server_pid)
    finally:
        child.kill()  # no teardown runs: only the kernel can stop the server now
        child.wait()
        if child.stdout is not None:
            child.stdout.close()
    deadline = time.monotonic() + 10
    while _alive(server_pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    if _alive(server_pid):  # leave nothing behind even when the claim fails
        os.kill(server_pid, signal.SIGKILL)
        raise AssertionError(f"nats-server {server_pid} outlived the process that started it")
