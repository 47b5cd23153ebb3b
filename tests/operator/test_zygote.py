"""The operator zygote (tests/operator/zygote.py): a child forked from it has the environment,
argv and log it was given, even for what a preloaded library read from the environment when
imported, and it is signalled, reaped and cleaned up as a process of its own."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from tests.operator.zygote import CLI_PRELOAD, Zygote

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
                "codec": seen["codec"],
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


def test_an_operator_whose_environment_a_child_would_not_have_is_a_new_process(
    tmp_path: Path,
) -> None:
    """The zygote imported ``wayline`` with this process's ``WAYLINE_CODEC``; an operator
    started with another must run with the codec a new interpreter picks for it, not the
    zygote's (``Operator.start`` asks ``forkable``)."""
    from tests.operator.test_workflowrun import Operator

    class Probe(Operator):
        def command(self) -> list[str]:
            return [*PROBE, "codec"]

    started = os.environ.get("WAYLINE_CODEC", "auto")
    env = {**os.environ, "WAYLINE_CODEC": "json" if started != "json" else "auto"}
    new = subprocess.run([*PROBE, "codec"], env=env, capture_output=True, text=True, check=True)
    probe = Probe("ns", env, tmp_path / "probe.log")
    probe.start()
    assert probe.proc is not None
    assert probe.proc.wait(timeout=60) == 0
    assert _printed(tmp_path / "probe.log")["codec"] == json.loads(new.stdout)["codec"]


def test_a_zygote_started_from_a_thread_that_ends_lives_on(tmp_path: Path) -> None:
    """The kernel's parent-death signal follows the thread that started a process: a zygote
    started under it from a worker thread (``cli_zygote`` restarting a dead one from an
    executor's thread) died when that thread ended, and every later spawn failed."""
    started: list[Zygote] = []
    thread = threading.Thread(target=lambda: started.append(Zygote(CLI_PRELOAD)))
    thread.start()
    thread.join()
    [zygote] = started
    try:
        child = zygote.spawn([*PROBE, "after"], dict(os.environ), tmp_path / "after.log")
        assert child.wait(timeout=60) == 0
        assert _printed(tmp_path / "after.log")["argv"] == ["after"]
        assert zygote.alive()
    finally:
        zygote.close()


DIES = """
import os, sys, time
from pathlib import Path
from tests.operator.zygote import CLI_PRELOAD, Zygote
zygote = Zygote(CLI_PRELOAD)
child = zygote.spawn([sys.executable, "-m", "tests.operator.zygote_probe", "--wait"],
                     dict(os.environ), Path(sys.argv[1]))
print(zygote.proc.pid, child.pid, flush=True)
time.sleep(120)
"""


def _gone(pid: int) -> bool:
    """No process ``pid``, or only its zombie (init reaps an orphan's in its own time)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (FileNotFoundError, ProcessLookupError):
        return True


def test_the_zygote_and_its_children_end_when_the_test_process_is_killed(
    tmp_path: Path,
) -> None:
    """A test process killed outright (no teardown runs) leaves neither its zygote nor a
    child of it behind: the zygote ends when its stdin, whose write end only the test process
    held, reaches its end, and its children follow it by their parent-death signal."""
    holder = subprocess.Popen(
        [sys.executable, "-c", DIES, str(tmp_path / "left.log")],
        stdout=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).resolve().parents[2],
    )
    try:
        assert holder.stdout is not None
        zygote_pid, child_pid = map(int, holder.stdout.readline().split())
        _printed(tmp_path / "left.log")
        assert not _gone(zygote_pid) and not _gone(child_pid)
    finally:
        holder.kill()
        holder.wait()
        if holder.stdout is not None:
            holder.stdout.close()
    deadline = time.monotonic() + 30
    while not (_gone(zygote_pid) and _gone(child_pid)):
        assert time.monotonic() < deadline, "the zygote or its child outlived the test process"
        time.sleep(0.05)


def test_a_forked_child_can_lead_its_group_and_write_to_a_pipe(tmp_path: Path) -> None:
    """``process_group`` and ``pipe_stdout``, as ``subprocess.Popen``'s ``process_group=0``
    and ``stdout=PIPE``: the group is the child's before ``spawn`` returns (a test may signal
    it at once), and the pipe ends when the child does."""
    zygote = Zygote(CLI_PRELOAD)
    try:
        child = zygote.spawn(
            [*PROBE, "--wait"],
            dict(os.environ),
            tmp_path / "err.log",
            pipe_stdout=True,
            process_group=True,
        )
        assert os.getpgid(child.pid) == child.pid != os.getpgid(0)
        assert child.stdout is not None
        with child.stdout:
            assert json.loads(child.stdout.readline())["argv"] == ["--wait"]
            os.killpg(child.pid, signal.SIGTERM)
            assert child.stdout.read() == b""  # the end: no other process holds the pipe
        assert child.wait(timeout=60) == -signal.SIGTERM
    finally:
        zygote.close()
