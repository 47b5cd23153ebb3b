"""Start/end markers written by every step body of the soak apps (``bench/soak.py``).

One JSON line per event, appended to ``$WAYLINE_SOAK_MARKERS/markers-<pid>.jsonl`` (one file
per worker process, opened for append per line, never fsynced: a SIGKILL loses nothing the
kernel already has). A line: ``k`` (``start`` | ``end``), ``dir`` (``forward`` |
``compensate``), ``run``, ``sid`` (the step id, as in the log's ``correlationId``), ``key``
(the forward step's idempotency key without its direction: a forward body and its
compensation share it), ``i`` (the step's index in the workflow), ``att``, ``pid``, ``mono``
(``time.monotonic()``, one clock for every process on the machine), ``wall`` (``time.time()``)
and, on ``end``, ``how`` (``ok`` | ``cancelled`` | ``error``).
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import wayline

_DIR = os.environ.get("WAYLINE_SOAK_MARKERS")


def _write(line: dict[str, object]) -> None:
    if _DIR is None:
        return
    path = Path(_DIR) / f"markers-{os.getpid()}.jsonl"
    with path.open("a") as out:
        out.write(json.dumps(line, separators=(",", ":")) + "\n")


@asynccontextmanager
async def body(i: int) -> AsyncIterator[None]:
    """Marks the step body it wraps: a start line now, an end line however it ends."""
    ctx = wayline.step_context()
    key = ctx.forward_idempotency_key or ctx.idempotency_key
    base: dict[str, object] = {
        "dir": ctx.direction,
        "run": ctx.run_id,
        "sid": ctx.step_id,
        "key": key.rsplit(":", 1)[0],
        "i": i,
        "att": ctx.attempt,
        "pid": os.getpid(),
    }
    _write({"k": "start", **base, "mono": time.monotonic(), "wall": time.time()})
    how = "error"
    try:
        yield
        how = "ok"
    except asyncio.CancelledError:
        how = "cancelled"
        raise
    finally:
        _write({"k": "end", **base, "how": how, "mono": time.monotonic(), "wall": time.time()})
