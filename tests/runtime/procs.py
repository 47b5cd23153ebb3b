"""Processes of one test: ``python -m <module> URL ...`` of a test's process module, each
logging to its own file under the test's folder, killed by pid at the test's end."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


class Procs:
    """Processes of ``module`` (run with ``python -m``) on the world ``url``; a worker prints
    ``worker ready`` once it has started."""

    def __init__(self, url: str, tmp: Path, module: str) -> None:
        self.url, self.tmp, self.module = url, tmp, module
        self.procs: list[asyncio.subprocess.Process] = []

    async def spawn(self, *args: str, env: dict[str, str] | None = None) -> Any:
        log = open(self.tmp / f"proc-{len(self.procs)}.log", "wb")  # noqa: SIM115, ASYNC230
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            self.module,
            self.url,
            *args,
            cwd=ROOT,
            stdout=asyncio.subprocess.PIPE,
            stderr=log,
            env={**os.environ, **(env or {})},
        )
        log.close()
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
