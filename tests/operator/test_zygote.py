"""The operator zygote (tests/operator/zygote.py): a child forked from it has the environment,
argv and log it was given, even for what a preloaded library read from the environment when
imported, and it is signalled, reaped and cleaned up as a process of its own."""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path

from tests.operator.zygote import Zygote

PROBE = [sys.executable, "-m", "tests.operator.zygote_probe"]


def _printed(log: Path) -> dict[str, object]:
    deadline = time.monotonic() + 60
    while not log.exists() or not log.read_text().strip():
        assert time.monotonic() < deadline, "the probe printed nothing"
        time.sleep(0.05)
    found: dict[str, object] = json.loads(log.read_text().splitlines()[0])
    return found


def test_a_forked_child_has_its_own_environment_even_for_a_preloaded_library(
    tmp_path: Path,
) -> None:
    zygote = Zygote()
    try:
        for n in range(2):  # the second child must not see the first's
            env = {**os.environ, "KUBECONFIG": str(tmp_path / f"k{n}"), "ZYGOTE_PROBE_MARK": str(n)}
            child = zygote.spawn([*PROBE, f"arg{n}"], env, tmp_path / f"probe{n}.log")
            assert child.wait(timeout=60) == 0
            seen = _printed(tmp_path / f"probe{n}.log")
            assert seen == {
                "argv": [f"arg{n}"],
                "cwd": os.getcwd(),
                "mark": str(n),
                "kubeconfig": str(tmp_path / f"k{n}"),
            }
    finally:
        zygote.close()


def test_a_forked_child_is_signalled_and_reaped_and_none_outlives_the_zygote(
    tmp_path: Path,
) -> None:
    zygote = Zygote()
    try:
        codes = []
        for sig in (signal.SIGTERM, signal.SIGKILL):
            child = zygote.spawn([*PROBE, "--wait"], dict(os.environ), tmp_path / "w.log")
            _printed(tmp_path / "w.log")
            assert child.poll() is None
            child.send_signal(sig)
            codes.append(child.wait(timeout=30))
        assert codes == [-signal.SIGTERM, -signal.SIGKILL]
        left = zygote.spawn([*PROBE, "--wait"], dict(os.environ), tmp_path / "left.log")
        _printed(tmp_path / "left.log")
    finally:
        zygote.close()
    assert not Path(f"/proc/{left.pid}").exists()  # killed and reaped, not a zombie
