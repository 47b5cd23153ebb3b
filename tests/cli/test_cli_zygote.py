"""The CLI tests' zygote (tests/operator/zygote.py, ``CLI_PRELOAD``): a ``wayline`` process
forked from it must be, to the test that started it, the process a new interpreter would have
been: the same output on each stream, the same exit status however the run ends, its own pid,
argv, environment, working directory and stdin (tests/cli/conftest.py uses it for ``cli`` and
``spawn``)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from tests.cli.conftest import Background, Cli, cli_zygote
from tests.operator.zygote import CLI_PRELOAD, MAX_ARG_BYTES, Forked, Zygote, forkable

REPO = Path(__file__).resolve().parents[2]
PROBE = [sys.executable, "-m", "tests.cli.zygote_probe"]
MODES = ("plain", "thread", "message", "code", "raise", "interrupt")


def _forked(zygote: Zygote, mode: str, env: dict[str, str], tmp: Path) -> tuple[int, str, str]:
    (tmp / "in").write_text("given on stdin\n")
    child = zygote.spawn(
        [*PROBE, mode],
        env,
        tmp / "err",
        cwd=REPO,
        stdin=tmp / "in",
        stdout=tmp / "out",
        stderr=tmp / "err",
    )
    assert child.pid not in (os.getpid(), zygote.proc.pid)
    code = child.wait(timeout=60)
    return code, (tmp / "out").read_text(), (tmp / "err").read_text()


def _tail(err: str) -> list[str]:
    """stderr without a traceback's frames, whose file paths differ (runpy's own are among a
    forked child's frames)."""
    return [line for line in err.splitlines() if not line.startswith((" ", "Traceback"))]


@pytest.mark.parametrize("mode", MODES)
def test_a_forked_process_prints_and_ends_as_a_new_interpreter_does(
    mode: str, tmp_path: Path
) -> None:
    env = {**os.environ, "PROBE_MARK": mode, "PYTHONUNBUFFERED": "1"}
    new = subprocess.run(
        [*PROBE, mode], cwd=REPO, env=env, input="given on stdin\n", capture_output=True, text=True
    )
    zygote = Zygote(CLI_PRELOAD)
    try:
        code, out, err = _forked(zygote, mode, env, tmp_path)
    finally:
        zygote.close()
    assert (code, out, _tail(err)) == (new.returncode, new.stdout, _tail(new.stderr))
    assert "atexit ran" in out and "stdin: given on stdin" in out


def test_a_forked_worker_is_signalled_and_its_exit_status_is_its_own(tmp_path: Path) -> None:
    """On a zygote of its own, as the probes: the test is about the zygote, and still runs
    with ``WAYLINE_TEST_ZYGOTE=0``, which turns off only the session's."""
    zygote = Zygote(CLI_PRELOAD)
    try:
        _signalled_worker(zygote, tmp_path)
    finally:
        zygote.close()


def _signalled_worker(zygote: Zygote, tmp_path: Path) -> None:
    name = f"zygote_probe_{uuid.uuid4().hex[:12]}"
    (tmp_path / "app.py").write_text(
        f"import wayline\n\n\n@wayline.workflow\nasync def {name}() -> None:\n    pass\n"
    )
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    world = f"sqlite:///{tmp_path / 'w.db'}"
    argv = [sys.executable, "-m", "wayline.cli", "worker", "--app", "app.py", "--world", world]
    argv += ["--processes", "1"]
    (tmp_path / "err").touch()
    (tmp_path / "err2").touch()
    worker = zygote.spawn(argv, env, tmp_path / "err", cwd=tmp_path, stdout=tmp_path / "out")
    deadline = time.monotonic() + 60
    while "ready on" not in (tmp_path / "err").read_text():
        assert worker.poll() is None, (tmp_path / "err").read_text()
        assert time.monotonic() < deadline, (tmp_path / "err").read_text()
        time.sleep(0.05)
    assert worker.pid not in (os.getpid(), zygote.proc.pid)
    worker.send_signal(signal.SIGTERM)  # the worker's own handler: a clean stop, status 0
    assert worker.wait(timeout=60) == 0, (tmp_path / "err").read_text()
    worker = zygote.spawn(argv, env, tmp_path / "err2", cwd=tmp_path, stdout=tmp_path / "out2")
    deadline = time.monotonic() + 60
    while "ready on" not in (tmp_path / "err2").read_text():
        assert worker.poll() is None, (tmp_path / "err2").read_text()
        assert time.monotonic() < deadline, (tmp_path / "err2").read_text()
        time.sleep(0.05)
    worker.send_signal(signal.SIGKILL)
    assert worker.wait(timeout=60) == -signal.SIGKILL
    assert not Path(f"/proc/{worker.pid}").exists()  # reaped, not a zombie


def test_an_environment_the_zygote_cannot_give_starts_a_new_interpreter() -> None:
    env = dict(os.environ)
    assert forkable(env)
    assert not forkable(
        {**env, "WAYLINE_CODEC": "json" if env.get("WAYLINE_CODEC") != "json" else "auto"}
    )
    assert not forkable({**env, "PYTHONHASHSEED": "7" if env.get("PYTHONHASHSEED") != "7" else "8"})
    assert forkable({**env, "PYTHONUNBUFFERED": "1", "WAYLINE_POLL_INTERVAL": "0.02"})
    # an argument execve would refuse (E2BIG): a test about that refusal gets a real exec
    assert not forkable(env, ["wayline", "x" * MAX_ARG_BYTES])
    assert forkable(env, ["wayline", "x" * 1000])


class _ProbeCli(Cli):
    """The conftest's ``cli`` running the probe instead of ``wayline.cli``: the same choice
    of a forked child or a new interpreter."""

    def argv(self, *args: str, world: str | None = None) -> list[str]:
        return [*PROBE, *args]


def test_a_codec_set_after_the_zygote_started_gets_the_codec_a_new_interpreter_gets(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A test that sets WAYLINE_CODEC in this process's environment after the session's
    zygote imported wayline (``monkeypatch.setenv`` before the ``cli`` fixture copies it):
    its commands must run with that codec, not the zygote's (with ``WAYLINE_TEST_ZYGOTE=0``
    both are new interpreters)."""
    cli_zygote()  # started before the change, as the session's is
    started = os.environ.get("WAYLINE_CODEC", "auto")
    monkeypatch.setenv("WAYLINE_CODEC", "json" if started != "json" else "auto")
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    probe = _ProbeCli(REPO, "", env)
    new = subprocess.run(
        [*PROBE, "codec"], cwd=REPO, env=env, input="", capture_output=True, text=True
    )
    done = probe("codec", stdin="")
    assert new.returncode == 0, new.stderr
    assert done.returncode == 0, done.stderr
    codec = [line for line in new.stdout.splitlines() if line.startswith("codec:")]
    assert codec == [line for line in done.stdout.splitlines() if line.startswith("codec:")]


class _Reaped:
    """A zygote that has reaped its child but whose ``exit`` line has not arrived yet."""

    def __init__(self) -> None:
        self.asked = 0

    def exit_code(self, pid: int) -> int | None:
        self.asked += 1
        return None if self.asked == 1 else 0

    def wait_exit(self, pid: int, timeout: float | None) -> int | None:
        return 0


def test_stopping_a_child_reaped_but_not_yet_reported_is_not_an_error(tmp_path: Path) -> None:
    gone = subprocess.Popen(["true"])
    gone.wait()  # reaped: its pid names no process
    child = Forked(_Reaped(), gone.pid, ["wayline"])  # type: ignore[arg-type]
    bg = Background(child, tmp_path / "out", tmp_path / "err")
    assert bg.stop() == 0


def test_an_unbuffered_child_writes_half_a_line_at_once_as_a_new_interpreter_does(
    tmp_path: Path,
) -> None:
    """``PYTHONUNBUFFERED`` makes both stdout and stderr write through: a child that ends
    without flushing (``os._exit``, SIGKILL) has left what it wrote on either."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    new = subprocess.run(
        [*PROBE, "partial"], cwd=REPO, env=env, input="", capture_output=True, text=True
    )
    zygote = Zygote(CLI_PRELOAD)
    try:
        code, out, err = _forked(zygote, "partial", env, tmp_path)
    finally:
        zygote.close()
    tail = len("half a line out")
    assert (new.returncode, new.stdout[-tail:], new.stderr) == (
        0,
        "half a line out",
        "half a line err",
    )
    assert (code, out[-tail:], err) == (0, "half a line out", "half a line err")


def test_forked_children_draw_random_numbers_and_uuids_of_their_own(tmp_path: Path) -> None:
    """The zygote imported ``random`` (asyncio does) and so seeded it once; each child is
    seeded anew when forked (``random``'s at-fork hook), as each new interpreter is, so two
    workers never pick the same jitter or id."""
    zygote = Zygote(CLI_PRELOAD)
    try:
        drawn = set()
        for n in range(3):
            (tmp_path / str(n)).mkdir()
            code, out, err = _forked(zygote, "random", dict(os.environ), tmp_path / str(n))
            assert code == 0, err
            [line] = [line for line in out.splitlines() if line.startswith("random:")]
            drawn.add(line)
        assert len(drawn) == 3
    finally:
        zygote.close()
