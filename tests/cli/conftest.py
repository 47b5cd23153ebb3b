"""Helpers for driving the ``wayline`` CLI through subprocesses, each stopped by its pid.

A ``wayline`` process a test starts (``cli(...)``, ``spawn(...)``) is forked from this test
process's CLI zygote (tests/operator/zygote.py, ``CLI_PRELOAD``), which imported the package
once: a process of its own, with its own pid, signals, environment, working directory, files
and exit status, without an interpreter start and the package's import each time (about 0.7 s
of CPU, several seconds of wall time under load). ``WAYLINE_TEST_ZYGOTE=0`` starts each one as a
new interpreter instead, as does a command whose environment the zygote cannot give a child
(``forkable``)."""

from __future__ import annotations

import contextlib
import importlib
import io
import json
import logging
import os
import signal
import subprocess
import sys
import sysconfig
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from unittest import mock

import pytest

import wayline
from tests.operator.zygote import Forked, Zygote, cli_zygote, cli_zygote_for

FLOWS = Path(__file__).with_name("flows.py")
REPO = Path(__file__).resolve().parents[2]


def zygote_for(env: dict[str, str], argv: list[str]) -> Zygote | None:
    """The CLI zygote if a child of it would be what a new interpreter running ``argv`` with
    ``env`` is, else None (a new interpreter): ``cli_zygote_for``."""
    return cli_zygote_for(env, argv)


@pytest.fixture(scope="session", autouse=True)
def _cli_zygote() -> None:
    """Started before the first test (ended with the session, tests/conftest.py), so that a
    test's ``monkeypatch.setenv`` comes after the environment it was started with."""
    cli_zygote()


@dataclass
class Cli:
    cwd: Path
    world: str
    env: dict[str, str]

    def __call__(
        self,
        *args: str,
        world: str | None = None,
        timeout: float = 20,
        stdin: str | None = None,
        **env: str,
    ) -> subprocess.CompletedProcess[str]:
        argv, full = self.argv(*args, world=world), {**self.env, **env}
        zygote = zygote_for(full, argv)
        if zygote is None:
            return subprocess.run(
                argv,
                cwd=self.cwd,
                env=full,
                input=stdin,
                capture_output=True,
                text=True,
                timeout=timeout,
                check=False,
            )
        with tempfile.TemporaryDirectory(prefix="wayline-cli-") as tmp:
            files = Path(tmp)
            (files / "in").write_text(stdin or "")
            proc = zygote.spawn(
                argv,
                full,
                files / "err",
                cwd=self.cwd,
                stdin=files / "in" if stdin is not None else None,
                stdout=files / "out",
                stderr=files / "err",
            )
            try:
                code = proc.wait(timeout)
            except subprocess.TimeoutExpired:  # as ``subprocess.run`` does: killed, then raised
                proc.kill()
                proc.wait(10)
                raise
            out, err = (files / "out").read_text(), (files / "err").read_text()
        return subprocess.CompletedProcess(argv, code, out, err)

    def here(
        self, *args: str, world: str | None = None, stdin: str | None = None, **env: str
    ) -> subprocess.CompletedProcess[str]:
        """The same command run in this process (``wayline.cli.main``, its output captured),
        for a test about what a command says or does rather than about the process running it:
        a subprocess costs an interpreter start and the package's import, about a second on an
        idle machine and several under load, and a child forked from the zygote still took 2-6
        s for one ``start`` beside a busy worker (0.05-0.4 s here). A command that loads an
        application file (``run``, ``start FILE:NAME``, ``recover --app``) loads it afresh
        each time, as a new process would: ``own_registry``. ``env`` adds to the environment
        for this command only, as for a subprocess."""
        from wayline.cli import main

        argv = [*args, "--world", world or self.world]
        out, err = io.StringIO(), io.StringIO()
        root = logging.getLogger()
        handlers, level = list(root.handlers), root.level
        try:
            with (
                own_registry(),
                mock.patch.dict(os.environ, {**self.env, **env}, clear=True),
                mock.patch.object(sys, "stdin", _standard_input(stdin)),
                contextlib.chdir(self.cwd),
                contextlib.redirect_stdout(out),
                contextlib.redirect_stderr(err),
            ):
                try:
                    code = main(argv)
                except SystemExit as refused:  # argparse refuses a bad argument so
                    code = int(refused.code or 0)
        finally:  # the command configured logging to the captured stream, which ends here
            root.handlers[:] = handlers
            root.setLevel(level)
        return subprocess.CompletedProcess(argv, code, out.getvalue(), err.getvalue())

    def popen(self, *args: str) -> subprocess.Popen[bytes] | Forked:
        """``wayline ARGS`` started in the background with its stdout a pipe the test reads
        (``proc.stdout``, bytes) and its stderr in a file of ``cwd``: forked from the CLI
        zygote when a child of it would be what a new interpreter is, else a new one."""
        argv = self.argv(*args)
        err = self.cwd / f"popen-{uuid.uuid4().hex[:8]}.err"
        zygote = zygote_for(self.env, argv)
        if zygote is not None:
            return zygote.spawn(argv, self.env, err, cwd=self.cwd, pipe_stdout=True)
        with err.open("wb") as e:
            return subprocess.Popen(
                argv, cwd=self.cwd, env=self.env, stdout=subprocess.PIPE, stderr=e
            )

    def argv(self, *args: str, world: str | None = None) -> list[str]:
        return [sys.executable, "-m", "wayline.cli", *args, "--world", world or self.world]

    def json(self, *args: str) -> Any:
        done = self.here(*args, "--json")
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    def wait_status(self, run_id: str, status: str, timeout: float = 30) -> Any:
        """The run once it has ``status``; the bound leaves room for a worker process that
        has yet to start on a loaded machine."""
        deadline = time.monotonic() + timeout
        while True:
            shown = self.json("runs", "show", run_id)
            if shown["status"] == status:
                return shown
            assert time.monotonic() < deadline, f"run {run_id} still {shown['status']}"
            time.sleep(0.1)


def _standard_input(text: str | None) -> io.TextIOWrapper:
    """Standard input as a process has it: text over a binary buffer, which ``--input @-``
    reads (``wayline.cli.loading.json_text``). A ``StringIO`` has no buffer and sent the
    command down a fallback that no process takes."""
    return io.TextIOWrapper(io.BytesIO((text or "").encode()), encoding="utf-8")


@contextlib.contextmanager
def own_registry() -> Iterator[None]:
    """While a command runs in this process, the step and workflow registry starts empty and
    the modules and import paths it adds are taken away again, so each command loads its
    application file afresh, as the new process it stands for would. Without it one process
    registers a name once: ``tests/cli/flows.py``'s ``saga`` would clash with the workflow of
    that name that ``tests/runtime/flows.py`` registers when a test here imports it, and a
    second load of a changed file would get the first one's module from ``sys.modules``."""
    from wayline._core import definitions

    modules, path = set(sys.modules), list(sys.path)
    importlib.invalidate_caches()  # a file the test wrote just now is found
    try:
        with (
            mock.patch.dict(definitions._STEPS, clear=True),
            mock.patch.dict(definitions._IMPLICIT_WORKFLOWS, clear=True),
        ):
            yield
    finally:
        for name in set(sys.modules) - modules:
            module = sys.modules[name]
            if not (getattr(module, "__file__", None) or "").startswith(_PACKAGE_FOLDERS):
                del sys.modules[name]  # the application's, not a lazily imported library
        sys.path[:] = path


_PACKAGE_FOLDERS = tuple(
    {sysconfig.get_paths()[key] + os.sep for key in ("stdlib", "platstdlib", "purelib", "platlib")}
    | {str(Path(wayline.__file__).resolve().parent) + os.sep}
)
"""Where the modules a command may import for the first time (a world, a codec) live: they
stay imported, as they would in a long-lived process; everything else it imported was the
application's."""


@dataclass
class Background:
    proc: subprocess.Popen[str] | Forked
    stdout: Path
    stderr: Path

    def output(self) -> tuple[str, str]:
        return self.stdout.read_text(), self.stderr.read_text()

    def wait_for(self, text: str, timeout: float = 10) -> str:
        deadline = time.monotonic() + timeout
        while True:
            _, err = self.output()
            if text in err:
                return err
            assert self.proc.poll() is None or text in self.output()[1], (
                f"process exited ({self.proc.returncode}) without printing {text!r}:\n{err}"
            )
            assert time.monotonic() < deadline, f"no {text!r} within {timeout}s:\n{err}"
            time.sleep(0.05)

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 10) -> int:
        """Signals the process unless it has ended, then waits for its exit status. Through
        ``send_signal``: a forked child the zygote has reaped but not yet reported is gone
        (``ProcessLookupError`` from a bare ``os.kill``)."""
        self.proc.send_signal(sig)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait(5)


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    env = dict(os.environ)
    env.pop("WAYLINE_WORLD", None)
    env["PYTHONUNBUFFERED"] = "1"
    env["WAYLINE_POLL_INTERVAL"] = "0.02"
    return Cli(tmp_path, f"sqlite:///{tmp_path / 'w.db'}", env)


@pytest.fixture(params=["sqlite", "nats"])
def world_url(request: pytest.FixtureRequest, cli: Cli) -> str:
    """The world the ``cli`` commands use, once SQLite and once NATS (a prefix of its own)."""
    if request.param == "sqlite":
        return cli.world
    return _on_nats(request, cli)


@pytest.fixture
def nats_world(request: pytest.FixtureRequest, cli: Cli) -> str:
    """The ``cli`` commands on NATS only (a prefix of their own)."""
    return _on_nats(request, cli)


def _on_nats(request: pytest.FixtureRequest, cli: Cli) -> str:
    from tests.nats_fixtures import require_nats

    require_nats()
    server = request.getfixturevalue("nats_server")
    cli.world = f"{server.url}?prefix=t{uuid.uuid4().hex[:12]}"
    return cli.world


@pytest.fixture
def spawn(cli: Cli) -> Iterator[Callable[..., Background]]:
    started: list[Background] = []

    def start(*args: str, cwd: Path | None = None) -> Background:
        """``wayline ARGS`` in the background, its output in files of ``cli.cwd``; ``cwd`` is
        the directory it runs in (``cli.cwd`` unless given): ``python -m`` puts it first on
        the import path, as the repository's root makes its test applications importable
        without a ``PYTHONPATH``, which the zygote cannot give a child (``forkable``)."""
        n, where = len(started), cwd or cli.cwd
        out, err = cli.cwd / f"bg{n}.out", cli.cwd / f"bg{n}.err"
        zygote = zygote_for(cli.env, cli.argv(*args))
        proc: subprocess.Popen[str] | Forked
        if zygote is not None:
            out.touch()
            err.touch()
            proc = zygote.spawn(cli.argv(*args), cli.env, err, cwd=where, stdout=out, stderr=err)
        else:
            with out.open("w") as o, err.open("w") as e:
                proc = subprocess.Popen(
                    cli.argv(*args), cwd=where, env=cli.env, stdout=o, stderr=e, text=True
                )
        bg = Background(proc, out, err)
        started.append(bg)
        return bg

    yield start
    for bg in started:
        bg.stop(signal.SIGKILL if bg.proc.poll() is None else signal.SIGTERM)


InProcess = Callable[..., tuple[int, str, str]]
Run = InProcess


def in_process(
    world_url: str,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    app: tuple[str, str],
) -> InProcess:
    """``run(*argv)``: the exit code, stdout and stderr of ``wayline ARGV --world URL`` run
    in-process, in ``tmp_path`` holding the app file ``app`` (name, source). An app of its own
    per test: an in-process import of ``tests/cli/flows.py`` would clash with the workflows of
    the same names the runtime tests import, and one process registers a name once."""
    from wayline.cli import main

    name, source = app
    (tmp_path / name).write_text(source)
    monkeypatch.chdir(tmp_path)
    capsys.readouterr()

    def run(*argv: str) -> tuple[int, str, str]:
        try:
            code = main([*argv, "--world", world_url])
        except SystemExit as refused:  # argparse refuses a bad argument so
            code = int(refused.code or 0)
        out, err = capsys.readouterr()
        return code, out, err

    return run


@pytest.fixture
def run(
    world_url: str,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> Run:
    """``run(*argv)`` in a directory holding ``app.py``, whose one workflow is named anew for
    each test."""
    source = (
        "import wayline\n\n\n"
        "@wayline.workflow\n"
        f"async def greet_{uuid.uuid4().hex[:12]}(name: str) -> str:\n"
        "    return name\n"
    )
    return in_process(world_url, capsys, tmp_path, monkeypatch, ("app.py", source))
