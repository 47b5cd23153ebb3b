"""Operator and CLI processes forked from one that imported their libraries once (``Zygote``).

``python -m wayline_operator`` spends most of its start importing kopf, the kubernetes client,
aiohttp, nats and the runtime: about 2 s on an idle machine and 5-10 s under load, once per
operator a test starts. The zygote is a process of this test process's interpreter that
imports those once (only modules that read no environment when imported) and forks a child
for each operator: the child takes the operator's environment, argv, working directory and
log, and runs the module as ``python -m`` does. It is still a process of its own, with its own
pid, its own signal handlers (kopf's), killed by SIGKILL and stopped by SIGTERM as before; the
operator's own modules (which read their settings when imported) are imported in the child.

The CLI tests (tests/cli/conftest.py) use a zygote of their own that preloads ``wayline.cli``
(``CLI_PRELOAD``) for the ``wayline`` processes they start: those children also take a file
for each of stdin, stdout and stderr instead of one log, and end as the interpreter ends a
``python -m`` run (non-daemon threads joined, ``atexit`` run, a ``SystemExit`` message printed,
SIGINT's ``KeyboardInterrupt`` turned back into death by SIGINT).

Run as a script, this file is the zygote: its arguments are the modules to preload (``PRELOAD``
when none), then one JSON request a line on stdin (``argv``, ``env``, ``cwd``, ``log``, and
optionally ``stdin``, ``stdout``, ``stderr``), one line back on stdout for each (``pid N``,
or ``error ...``), and a line ``exit PID CODE`` when a child ends (as ``subprocess`` reports
it: minus the signal's number for a child a signal ended). Each child gets the kernel's
parent-death signal; the zygote ends when its stdin does, which happens when the test process
dies however it dies (its write end is the test process's alone): a test run killed mid-way
leaves no operator behind. Closing the zygote's stdin kills its children that are left and
ends it. A request may also ask for the child to lead a process group of its own
(``pgroup``), and name a pipe of the test process for its stdout (``Zygote.spawn``'s
``pipe_stdout``).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any, BinaryIO

#: Imported once by the zygote. The runtime reads the environment through
#: ``wayline.settings`` at call time; of the libraries only the kubernetes client reads one
#: variable the operator's environment sets when imported (``KUBECONFIG``: ``_rebind`` reads
#: it again in the child); the operator's handler modules read their settings when imported,
#: so each child imports those itself.
PRELOAD = (
    "asyncio",
    "aiohttp",
    "kopf",
    "kubernetes",
    "kubernetes.client",
    "nats",
    "pydantic",
    "wayline",
    "wayline.worlds.local",
    "wayline.worlds.nats",
)

#: Imported once by the CLI tests' zygote: what ``python -m wayline.cli`` imports before it
#: reads its arguments. ``wayline.settings`` reads ``WAYLINE_CODEC`` when imported, so a
#: command whose environment sets it differently is started as a process of its own
#: (``forkable``).
CLI_PRELOAD = (
    "asyncio",
    "nats",
    "pydantic",
    "wayline",
    "wayline.cli",
    "wayline.worlds.local",
    "wayline.worlds.nats",
)


#: Linux's MAX_ARG_STRLEN: ``execve`` refuses a longer argument (E2BIG), a fork does not.
MAX_ARG_BYTES = 32 * 4096


def forkable(
    env: dict[str, str], args: list[str] | None = None, base: Mapping[str, str] | None = None
) -> bool:
    """Whether a child forked from a zygote started with the environment ``base`` (this
    process's when None) would be what ``execve`` of ``args`` with ``env`` gives: the kernel
    would take the arguments (a test may be about its refusal), and the interpreter's own
    variables (``PYTHON*``, of which only ``PYTHONUNBUFFERED`` is applied again in the child)
    and the codec the runtime picks when imported are the same. Ask a running zygote through
    ``Zygote.forkable``: this process's environment may have changed since it started (a
    test's ``monkeypatch.setenv``), the zygote's imports have not."""

    def fixed(e: Mapping[str, str]) -> dict[str, str]:
        return {
            k: v
            for k, v in e.items()
            if (k.startswith("PYTHON") and k != "PYTHONUNBUFFERED") or k == "WAYLINE_CODEC"
        }

    if any(len(arg.encode()) >= MAX_ARG_BYTES for arg in args or ()):
        return False
    return fixed(env) == fixed(os.environ if base is None else base)


class Forked:
    """A child of the zygote, with the part of ``subprocess.Popen`` the tests use."""

    def __init__(self, zygote: Zygote, pid: int, args: list[str]) -> None:
        self.zygote, self.pid, self.args = zygote, pid, args
        self.returncode: int | None = None
        #: the read end of its stdout when spawned with ``pipe_stdout``
        self.stdout: BinaryIO | None = None

    def poll(self) -> int | None:
        self.returncode = self.zygote.exit_code(self.pid)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        code = self.zygote.wait_exit(self.pid, timeout)
        if code is None:
            raise subprocess.TimeoutExpired(self.args, timeout or 0.0)
        self.returncode = code
        return code

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, sig)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


class Zygote:
    """The test process's end of the zygote; ``spawn`` is thread-safe."""

    def __init__(self, preload: tuple[str, ...] = PRELOAD) -> None:
        #: the environment the zygote imported its modules with
        self.env = dict(os.environ)
        # Not under ``dying_with_us``: the kernel's parent-death signal follows the *thread*
        # that started the process, so a zygote started from a worker thread (an xdist
        # worker's, a fixture's executor) died when that thread ended, with its children.
        # The zygote ends instead when its stdin reaches its end: the write end is this
        # process's alone (non-inheritable, and ``subprocess`` closes other descriptors in
        # the processes it starts), so the kernel closes it when this process dies, however.
        self.proc = subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve()), *preload],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            cwd=Path(__file__).resolve().parents[2],
            env=self.env,
        )
        self._lock = threading.Lock()
        self._changed = threading.Condition()
        self._replies: list[str] = []
        self._exits: dict[int, int] = {}
        self._reader = threading.Thread(target=self._read, name="zygote-reader", daemon=True)
        self._reader.start()
        ready = self._reply(timeout=120)
        if ready != "ready":
            raise RuntimeError(f"the operator zygote did not start: {ready!r}")

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            line = raw.decode().strip()
            with self._changed:
                if line.startswith("exit "):
                    _, pid, code = line.split()
                    self._exits[int(pid)] = int(code)
                else:
                    self._replies.append(line)
                self._changed.notify_all()
        with self._changed:
            self._replies.append("gone")
            self._changed.notify_all()

    def _reply(self, timeout: float) -> str:
        with self._changed:
            if not self._changed.wait_for(lambda: self._replies, timeout=timeout):
                return "no answer"
            return self._replies.pop(0)

    def forkable(self, env: dict[str, str], args: list[str] | None = None) -> bool:
        """Whether a child of this zygote would be what ``execve`` of ``args`` with ``env``
        gives (``forkable`` against the environment the zygote started with)."""
        return forkable(env, args, self.env)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def spawn(
        self,
        args: list[str],
        env: dict[str, str],
        log: Path,
        *,
        cwd: Path | None = None,
        stdin: Path | None = None,
        stdout: Path | None = None,
        stderr: Path | None = None,
        pipe_stdout: bool = False,
        process_group: bool = False,
    ) -> Forked:
        """``args`` as for ``subprocess.Popen``: ``[python, "-m", MODULE, *argv]``; the child's
        stdout and stderr go to ``log`` unless ``stdout``/``stderr`` say otherwise, its stdin
        is ``/dev/null`` unless ``stdin`` names a file. ``pipe_stdout``: its stdout is a pipe
        whose read end is the child's ``stdout`` (as ``stdout=subprocess.PIPE`` gives: the end
        of the file once the child and whatever inherited it have closed it).
        ``process_group``: the child leads a process group of its own (``process_group=0``)."""
        assert args[1:2] == ["-m"], args
        request: dict[str, Any] = {
            "argv": args[2:],
            "env": env,
            "cwd": str(cwd or os.getcwd()),
            "log": str(log),
            "pgroup": process_group,
        }
        for name, path in (("stdin", stdin), ("stdout", stdout), ("stderr", stderr)):
            if path is not None:
                request[name] = str(path)
        read = write = -1
        if pipe_stdout:
            # The zygote opens the pipe's write end through /proc before it forks, so the
            # child holds it once the reply comes; then this process's copy is closed, as
            # ``subprocess`` closes its own, and the reader sees the end when the child's is.
            read, write = os.pipe()
            request["stdout"] = f"/proc/{os.getpid()}/fd/{write}"
        try:
            with self._lock:
                assert self.proc.stdin is not None
                self.proc.stdin.write(json.dumps(request).encode() + b"\n")
                self.proc.stdin.flush()
                reply = self._reply(timeout=60)
        finally:
            if write >= 0:
                os.close(write)
        if not reply.startswith("pid "):
            if read >= 0:
                os.close(read)
            raise RuntimeError(f"the operator zygote could not fork {args}: {reply}")
        child = Forked(self, int(reply.split()[1]), args)
        if read >= 0:
            child.stdout = os.fdopen(read, "rb")
        return child

    def exit_code(self, pid: int) -> int | None:
        with self._changed:
            return self._exits.get(pid)

    def wait_exit(self, pid: int, timeout: float | None) -> int | None:
        with self._changed:
            self._changed.wait_for(lambda: pid in self._exits, timeout=timeout)
            return self._exits.get(pid)

    def close(self) -> None:
        """Kills the children left (the zygote does) and ends the zygote."""
        if self.proc.stdin is not None:
            with contextlib.suppress(OSError):
                self.proc.stdin.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._reader.join(timeout=10)
        if self.proc.stdout is not None:
            self.proc.stdout.close()


_zygote: Zygote | None = None
_zygote_lock = threading.Lock()


def zygote() -> Zygote:
    """This test process's zygote, started on first use (``close_zygote`` ends it), from
    whichever thread: it lives as long as this process does (``Zygote``)."""
    global _zygote
    with _zygote_lock:
        if _zygote is None or not _zygote.alive():
            _zygote = Zygote()
        return _zygote


def close_zygote() -> None:
    global _zygote
    with _zygote_lock:
        if _zygote is not None:
            _zygote.close()
            _zygote = None


_cli_zygote: Zygote | None = None
_cli_zygote_lock = threading.Lock()


def cli_zygote() -> Zygote | None:
    """This test process's zygote of ``CLI_PRELOAD``, for the ``wayline`` and test-module
    processes the CLI, fault, runtime and NATS tests start; started on first use, from
    whichever thread (a dead one started anew), ended by ``close_cli_zygote`` (the session's
    end, tests/conftest.py). None when ``WAYLINE_TEST_ZYGOTE=0``: each process a new
    interpreter."""
    global _cli_zygote
    if os.environ.get("WAYLINE_TEST_ZYGOTE", "1") == "0":
        return None
    with _cli_zygote_lock:
        if _cli_zygote is None or not _cli_zygote.alive():
            _cli_zygote = Zygote(CLI_PRELOAD)
        return _cli_zygote


def cli_zygote_for(env: dict[str, str], argv: list[str]) -> Zygote | None:
    """The CLI zygote if a child of it would be what a new interpreter running ``argv`` with
    ``env`` is, else None (start a new interpreter): judged against the environment the
    zygote started with, not this process's now (a test may have changed it since)."""
    if argv[1:2] != ["-m"]:
        return None
    zygote = cli_zygote()
    return zygote if zygote is not None and zygote.forkable(env, argv) else None


def close_cli_zygote() -> None:
    global _cli_zygote
    with _cli_zygote_lock:
        if _cli_zygote is not None:
            _cli_zygote.close()
            _cli_zygote = None


# --- the zygote's side -------------------------------------------------------------------------

PR_SET_PDEATHSIG = 1


def _open_streams(request: dict[str, Any]) -> list[int]:
    """In the zygote, before it forks: the child's stdin, stdout and stderr, opened here so
    that a file that cannot be opened is an error said back, and so that a pipe's write end
    the test process offers through /proc (``pipe_stdout``) is held by the child before the
    reply lets the test process close its own."""
    opened = [os.open(request.get("stdin", os.devnull), os.O_RDONLY)]
    try:
        for name in ("stdout", "stderr"):
            opened.append(
                os.open(
                    request.get(name, request["log"]),
                    os.O_WRONLY | os.O_CREAT | os.O_APPEND,
                    0o644,
                )
            )
    except BaseException:
        for fd in opened:
            os.close(fd)
        raise
    return opened


def _child(request: dict[str, Any], zygote_pid: int, streams: list[int]) -> None:
    """In the forked child: become the operator process; never returns."""
    code = 1
    try:
        import ctypes
        import runpy

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != zygote_pid:  # the zygote died before the signal was set
            os._exit(1)
        if request.get("pgroup"):  # the zygote sets it too: whichever runs first
            with contextlib.suppress(OSError):
                os.setpgid(0, 0)
        for fd, opened in enumerate(streams):
            os.dup2(opened, fd)
        for opened in streams:
            os.close(opened)
        os.environ.clear()
        os.environ.update(request["env"])
        _streams()
        os.chdir(request["cwd"])
        sys.path[0] = request["cwd"]  # as ``python -m`` has it
        _rebind()
        module, *rest = request["argv"]
        sys.argv = [module, *rest]
        runpy.run_module(module, run_name="__main__", alter_sys=True)
        code = 0
    except SystemExit as stop:
        if isinstance(stop.code, int) or stop.code is None:
            code = stop.code or 0
        else:  # as the interpreter does: the message to stderr, exit status 1
            print(stop.code, file=sys.stderr)
    except KeyboardInterrupt:
        import traceback

        traceback.print_exc()
        code = -signal.SIGINT
    except BaseException:
        import traceback

        traceback.print_exc()
    finally:
        _finalize(code)


def _streams() -> None:
    """In the child, once its environment is set: ``sys.stdout`` and ``sys.stderr`` made anew
    as the interpreter makes them for that environment, since the zygote's were made for its
    own. With ``PYTHONUNBUFFERED`` each writes through to its file at once (no buffer at any
    level: what a child killed by SIGKILL or ended by ``os._exit`` wrote is there); without
    it stdout is block-buffered and stderr line-buffered."""
    import io

    unbuffered = bool(os.environ.get("PYTHONUNBUFFERED"))
    for fd, name in ((1, "stdout"), (2, "stderr")):
        old = getattr(sys, name)
        raw = io.FileIO(fd, "w", closefd=False)
        stream = io.TextIOWrapper(
            raw if unbuffered else io.BufferedWriter(raw),  # type: ignore[arg-type]
            encoding=old.encoding,
            errors=old.errors,
            line_buffering=not unbuffered and (fd == 2 or raw.isatty()),
            write_through=unbuffered,
        )
        setattr(sys, name, stream)
        setattr(sys, f"__{name}__", stream)


def _finalize(code: int) -> None:
    """What the interpreter does when a ``python -m`` run ends, then the exit: non-daemon
    threads joined, ``atexit`` handlers run (logging's flush among them), the streams flushed;
    a run a ``KeyboardInterrupt`` ended dies by SIGINT, as Python 3.8 and later do."""
    import atexit

    with contextlib.suppress(BaseException):
        threading._shutdown()  # type: ignore[attr-defined]
    with contextlib.suppress(BaseException):
        atexit._run_exitfuncs()
    with contextlib.suppress(Exception):
        sys.stdout.flush()
        sys.stderr.flush()
    if code == -signal.SIGINT:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
    os._exit(code if code >= 0 else 1)


def _rebind() -> None:
    """In the child, once its environment is set: what a preloaded library read from the
    environment when it was imported, read again from the child's."""
    if "kubernetes" not in sys.modules:  # a zygote that did not preload it (CLI_PRELOAD)
        return
    from kubernetes import config
    from kubernetes.config import kube_config

    location = os.environ.get("KUBECONFIG", "~/.kube/config")  # as kube_config.py reads it
    kube_config.KUBE_CONFIG_DEFAULT_LOCATION = location
    config.KUBE_CONFIG_DEFAULT_LOCATION = location  # type: ignore[attr-defined]


def _serve() -> None:
    import importlib
    import select

    sys.path[0] = os.getcwd()
    for name in sys.argv[1:] or PRELOAD:
        importlib.import_module(name)
    out = os.dup(1)  # the protocol's; a child's fd 1 is its log
    me = os.getpid()
    children: set[int] = set()

    def say(line: str) -> None:
        os.write(out, (line + "\n").encode())

    say("ready")
    pending = b""
    while True:
        readable, _, _ = select.select([0], [], [], 0.05)
        if readable:
            chunk = os.read(0, 1 << 16)
            if not chunk:
                break
            pending += chunk
            while b"\n" in pending:
                line, pending = pending.split(b"\n", 1)
                try:
                    request = json.loads(line)
                    streams = _open_streams(request)
                except Exception as err:  # said back to the test process
                    say(f"error {err!r}")
                    continue
                try:
                    pid = os.fork()
                except Exception as err:
                    for fd in streams:
                        os.close(fd)
                    say(f"error {err!r}")
                    continue
                if pid == 0:
                    os.close(out)
                    _child(request, me, streams)
                for fd in streams:  # the child's now: the next child must not inherit them
                    os.close(fd)
                if request.get("pgroup"):  # before the reply: the test may signal the group
                    with contextlib.suppress(OSError):
                        os.setpgid(pid, pid)
                children.add(pid)
                say(f"pid {pid}")
        while children:
            pid, status = os.waitpid(-1, os.WNOHANG)
            if pid == 0:
                break
            children.discard(pid)
            code = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
            say(f"exit {pid} {code}")
    for pid in children:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    for pid in children:
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)


if __name__ == "__main__":
    _serve()
