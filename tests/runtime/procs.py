"""Processes of one test: ``python -m <module> URL ...`` of a test's process module, each
logging to its own file under the test's folder, killed by pid at the test's end. Each is
forked from the test process's CLI zygote (tests/operator/zygote.py, ``cli_zygote``), which
imported ``wayline`` and both worlds once: a process of its own with its own pid, exit status
and environment, its stdout a pipe; an environment a forked child would not have
(``forkable``), or ``WAYLINE_TEST_ZYGOTE=0``, starts a new interpreter instead."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.operator.zygote import Forked, cli_zygote_for

ROOT = Path(__file__).resolve().parents[2]


class ForkedProcess:
    """A child of the zygote with the part of ``asyncio.subprocess.Process`` the tests use:
    ``pid``, ``stdout`` (a ``StreamReader`` on its pipe), ``returncode``, ``wait``, ``kill``
    and ``send_signal``."""

    def __init__(
        self, child: Forked, stdout: asyncio.StreamReader, pipe: asyncio.BaseTransport | None
    ) -> None:
        self.child, self.stdout, self.pid, self._pipe = child, stdout, child.pid, pipe

    @classmethod
    async def of(cls, child: Forked) -> ForkedProcess:
        reader = asyncio.StreamReader()
        pipe: asyncio.BaseTransport | None = None
        if child.stdout is not None:
            pipe, _ = await asyncio.get_running_loop().connect_read_pipe(
                lambda: asyncio.StreamReaderProtocol(reader), child.stdout
            )
        else:
            reader.feed_eof()
        return cls(child, reader, pipe)

    @property
    def returncode(self) -> int | None:
        return self.child.poll()

    def send_signal(self, sig: int) -> None:
        self.child.send_signal(sig)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    async def wait(self) -> int:
        """Its exit status, as the zygote reports it, waited for in a thread a second at a
        time, so that a test's ``wait_for`` that cancels this leaves no thread behind long."""
        while True:
            with contextlib.suppress(subprocess.TimeoutExpired):
                code = await asyncio.to_thread(self.child.wait, 1.0)
                if self._pipe is not None:
                    self._pipe.close()
                return code


async def exec_python(
    argv: list[str], env: dict[str, str], log: Path, *, pipe_stdout: bool = True
) -> asyncio.subprocess.Process | ForkedProcess:
    """``argv`` (``[python, "-m", MODULE, ...]``) started from the repository's root with
    ``env``: forked from the CLI zygote when a child of it would be what a new interpreter
    is, else a new interpreter. Its stderr goes to ``log``, its stdout to a pipe the test
    reads (``proc.stdout``) or, without ``pipe_stdout``, to ``log`` too."""
    zygote = cli_zygote_for(env, argv)
    if zygote is not None:
        child = zygote.spawn(argv, env, log, cwd=ROOT, pipe_stdout=pipe_stdout)
        return await ForkedProcess.of(child)
    with open(log, "ab") as err:  # noqa: ASYNC230 (a local file, opened once)
        return await asyncio.create_subprocess_exec(
            *argv,
            cwd=ROOT,
            stdout=asyncio.subprocess.PIPE if pipe_stdout else err,
            stderr=err,
            env=env,
        )


class Procs:
    """Processes of ``module`` (run with ``python -m``) on the world ``url``; a worker prints
    ``worker ready`` once it has started."""

    def __init__(self, url: str, tmp: Path, module: str) -> None:
        self.url, self.tmp, self.module = url, tmp, module
        self.procs: list[asyncio.subprocess.Process | ForkedProcess] = []

    async def spawn(self, *args: str, env: dict[str, str] | None = None) -> Any:
        proc = await exec_python(
            [sys.executable, "-m", self.module, self.url, *args],
            {**os.environ, **(env or {})},
            self.tmp / f"proc-{len(self.procs)}.log",
        )
        self.procs.append(proc)
        return proc

    async def worker(self, *args: str, env: dict[str, str] | None = None) -> Any:
        proc = await self.spawn(*args, env=env)
        line = await asyncio.wait_for(proc.stdout.readline(), 30)
        assert line.strip() == b"worker ready", line
        return proc

    async def stop(self, proc: Any) -> None:
        if proc.returncode is None:
            proc.kill()
        await proc.wait()

    async def close(self) -> None:
        for proc in self.procs:
            await self.stop(proc)
