"""Which engine files a compensating run's drive enters: ``python bench/unwind_stays.py``.

Runs ``golden.saga`` (two compensating steps, then a step that fails for good), or with ``--run
hook-conflict`` ``golden.conflict_after_a_step`` (a compensating step, then a hook whose token
another run holds: the world refuses the batch and the failure begins the unwind), on an
embedded world under ``sys.setprofile`` and keeps, of every new call (a coroutine's resumption
is not counted again) into a file of ``wayline/_engine``, those made under the
``Handler._drive`` frame that runs the unwind. A *stay* is a stretch of consecutive such calls
in one file. The report counts the ``unwind.py`` and ``session.py`` stays among the 30 stays
that start at the handler's stay handing the run to the unwind (the last ``handler.py`` stay
before the first ``unwind.py`` one), and over the whole unwind, and names the ``unwind.py``
functions called. The figures are counts, not timings: they do not depend on the machine's load.

To count an older tree, export it (``git archive COMMIT runtime tests | tar -x -C DIR``) and run
``PYTHONPATH=DIR/runtime python bench/unwind_stays.py --tree DIR``; for ``--run hook-conflict``
on a tree older than that workflow, copy today's ``tests/golden/workflows.py`` into DIR (it uses
only the public SDK).
"""

# ruff: noqa: E402 - sys.path is fixed before the imports (see bench/operator.py)

from __future__ import annotations

import sys

# run as ``python bench/unwind_stays.py``, bench/ is first on the path and its operator.py the
# operator module for every import below: take it off the path first
sys.path[:] = [p for p in sys.path if not p.endswith("bench")]

import argparse
import asyncio
import tempfile
from collections import Counter
from pathlib import Path
from types import FrameType
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def _trace(tree: Path, which: str) -> list[str]:
    """The calls under the drive that runs the unwind, as ``file:function``."""
    sys.path.insert(0, str(tree))
    from tests.golden import workflows

    import wayline

    engine = str(tree / "runtime" / "wayline" / "_engine")
    handler = str(Path(engine) / "handler.py")
    calls: dict[int, list[str]] = {}
    seen: dict[int, FrameType] = {}  # kept alive so that no id is reused

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        if event != "call" or id(frame) in seen:
            return
        seen[id(frame)] = frame
        name = frame.f_code.co_filename
        if not name.startswith(engine):
            return
        up: FrameType | None = frame
        while up is not None:
            if up.f_code.co_name == "_drive" and up.f_code.co_filename == handler:
                calls.setdefault(id(up), []).append(f"{Path(name).name}:{frame.f_code.co_name}")
                return
            up = up.f_back

    async def run() -> None:
        with tempfile.TemporaryDirectory() as tmp:
            world = wayline.LocalWorld(Path(tmp) / "wayline.db")
            async with world, wayline.Worker(world, workflows.WORKFLOWS):
                client = wayline.Client(world)
                if which == "hook-conflict":
                    token = "unwind-stays-held"
                    await client.start(workflows.approval, token)  # holds the token
                    await client.wait_for_hook(token, timeout="30s")
                sys.setprofile(profile)
                try:
                    if which == "hook-conflict":
                        wf = workflows.conflict_after_a_step
                        handle = await client.start(wf, "unwind-stays", token)
                    else:
                        handle = await client.start(workflows.saga, "unwind-stays")
                    try:
                        await handle.result(timeout=30)
                    except wayline.RunFailedError:
                        pass
                finally:
                    sys.setprofile(None)

    asyncio.run(run())
    return next(d for d in calls.values() if any(c.startswith("unwind.py:") for c in d))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", type=Path, default=ROOT, help="the source tree to count")
    parser.add_argument("--stays", type=int, default=30, help="how many stays to count")
    parser.add_argument(
        "--run", choices=["saga", "hook-conflict"], default="saga", help="which failing run"
    )
    args = parser.parse_args()
    drive = _trace(args.tree.resolve(), args.run)
    stays: list[str] = []
    for call in drive:
        name = call.split(":")[0]
        if not stays or stays[-1] != name:
            stays.append(name)
    first = stays.index("unwind.py")
    start = max(i for i in range(first) if stays[i] == "handler.py")
    head, whole = Counter(stays[start : start + args.stays]), Counter(stays[start:])
    print(
        f"first {args.stays} stays: unwind.py {head['unwind.py']}, session.py {head['session.py']}"
    )
    print(
        f"the whole unwind ({len(stays) - start} stays): unwind.py {whole['unwind.py']}, "
        f"session.py {whole['session.py']}"
    )
    print(" > ".join(stays[start : start + args.stays]))
    functions = Counter(c.split(":")[1] for c in drive if c.startswith("unwind.py:"))
    print("unwind.py functions called:", ", ".join(f"{k} {v}" for k, v in functions.items()))


if __name__ == "__main__":
    main()
