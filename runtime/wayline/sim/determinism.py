"""What a simulated run must not read from the machine: the time, fresh ids and the
process-wide random generator. For the length of one seed they come from the seed's loop and
generator; afterwards the real ones are back.

The engine reads ``time.time``, ``time.monotonic``, ``uuid.uuid4``, ``secrets.token_hex`` and
``random`` at call time, so replacing the module attributes reaches every caller. Iteration
over sets of strings also depends on ``PYTHONHASHSEED``: ``make sim`` fixes it, so a seed
replays the same in another process too.
"""

from __future__ import annotations

import contextlib
import os
import random
import secrets
import time
import uuid
from collections.abc import Callable, Iterator

from .._core import clock
from .._engine import eager
from .._engine.eager import EagerTask
from .loop import PROCESS, VirtualLoop


class ProcessExit(BaseException):
    """``os._exit`` in a simulated process: the process stops here (see :func:`patched`)."""


@contextlib.contextmanager
def patched(
    loop: VirtualLoop,
    rng: random.Random,
    on_exit: Callable[[int], None],
    wall: Callable[[], float] | None = None,
) -> Iterator[None]:
    """Inside the block the machine's clocks, ids and randomness are the seed's: ``wall`` is
    the wall clock (``time.time``, ``clock.now``), by default the loop's; the simulator passes
    one that each process reads with its own offset (``clocks.py``).

    ``os._exit`` (a worker that cannot cut off a body exits its process) crash-stops only the
    simulated process that called it: ``on_exit`` hears which one."""
    saved = (time.time, time.monotonic, uuid.uuid4, secrets.token_hex, os._exit)
    register = eager._register_task

    def register_here(task: EagerTask) -> None:
        # Registered with asyncio as before, and with the loop, which lists its tasks
        # without asyncio's walk over every task of the process (``VirtualLoop.tasks``).
        register(task)
        if task.get_loop() is loop:
            loop.adopt(task)

    state = random.getstate()

    def uuid4() -> uuid.UUID:
        return uuid.UUID(int=rng.getrandbits(128), version=4)

    def token_hex(nbytes: int | None = None) -> str:
        n = 32 if nbytes is None else nbytes
        return rng.getrandbits(n * 8).to_bytes(n, "big").hex() if n else ""

    def exit_(code: int) -> None:
        process = PROCESS.get()
        on_exit(process)
        loop.crash(process)
        raise ProcessExit(code)

    wall = loop.wall if wall is None else wall
    time.time, time.monotonic = wall, loop.time
    uuid.uuid4, secrets.token_hex = uuid4, token_hex
    os._exit = exit_  # type: ignore[assignment]
    eager._register_task = register_here
    random.seed(rng.getrandbits(64))
    clock.reset()
    clock.use(wall)
    try:
        yield
    finally:
        time.time, time.monotonic, uuid.uuid4, secrets.token_hex, os._exit = saved
        eager._register_task = register
        random.setstate(state)
        clock.use(None)
