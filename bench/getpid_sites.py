"""Where a step's ``getpid`` system calls come from, by the Python code that made each one.

    python bench/getpid_sites.py [--worlds local,nats] [--against COMMIT] [--depth 2]

On CPython 3.11 every ask of asyncio for the running loop (``get_running_loop``,
``current_task()``, ``ensure_future`` or a ``Future`` made without a loop, ``Event.wait``,
``asyncio.wait``, ``asyncio.sleep`` ...) calls ``getpid`` in C, to check the loop against the
process that set it, so ``bench/steady.py``'s syscall counts show them but cannot say who
asked, and no Python hook sees them. This script compiles a small shared library (with ``cc``
against this Python's headers) whose ``getpid`` is preloaded (``LD_PRELOAD``) into a child
process: while the child's measured part runs, each call writes the Python stack that made it
(``--depth`` frames, innermost first, each named by its file and function, and its line with
``--lines``) to a file. The child runs ``bench/steady.py``'s
workload: one worker in the client's process, three warm-up runs, then ``--runs`` sequential
runs of ``--steps`` no-op steps. The table gives each stack's calls per step, for this tree
and (``--against``) another commit's ``runtime``, exported as ``bench/steady.py`` does.
"""
# ruff: noqa: E402 - sys.path is fixed before the imports (see bench/operator.py)

from __future__ import annotations

import sys

# the script's own folder holds bench/operator.py, which would shadow the standard library's
sys.path[:] = [p for p in sys.path if p not in ("", __file__.rpartition("/")[0])]

import argparse
import asyncio
import contextlib
import ctypes
import os
import re
import subprocess
import sysconfig
import tempfile
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent

_SHIM = r"""
#define _GNU_SOURCE
#include <Python.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

int getpid_sites_on = 0; /* set by the child, through ctypes, around its measured part */
static int out = -1;

pid_t getpid(void) {
    pid_t pid = (pid_t)syscall(SYS_getpid);
    if (!getpid_sites_on || !Py_IsInitialized() || !PyGILState_Check()) return pid;
    if (out < 0) out = open(getenv("GETPID_SITES_OUT"), O_WRONLY | O_CREAT | O_APPEND, 0600);
    if (out < 0) return pid;
    char line[4096];
    int n = 0, depth = 0;
    PyFrameObject *frame = PyEval_GetFrame();
    Py_XINCREF(frame);
    while (frame != NULL && depth < DEPTH && n < 3800) {
        PyCodeObject *code = PyFrame_GetCode(frame);
        n += snprintf(line + n, sizeof line - n, "%s%s:%d:%s", depth ? " <- " : "",
                      PyUnicode_AsUTF8(code->co_filename), PyFrame_GetLineNumber(frame),
                      PyUnicode_AsUTF8(code->co_qualname));
        Py_DECREF(code);
        PyFrameObject *back = PyFrame_GetBack(frame);
        Py_DECREF(frame);
        frame = back;
        depth++;
    }
    Py_XDECREF(frame);
    line[n++] = '\n';
    if (write(out, line, n) < 0) { /* a lost line only undercounts */ }
    return pid;
}
"""


def build_shim(folder: Path, depth: int) -> Path:
    source, library = folder / "getpid_sites.c", folder / "getpid_sites.so"
    source.write_text(_SHIM)
    include = sysconfig.get_paths()["include"]
    subprocess.run(
        [
            *("cc", "-O2", "-shared", "-fPIC", f"-DDEPTH={depth}", f"-I{include}"),
            *("-o", str(library), str(source)),
        ],
        check=True,
    )
    return library


async def child(url: str, steps: int, runs: int) -> None:
    import wayline

    sys.path.append(str(HERE))
    from flows import bench_chain

    on = ctypes.c_int.in_dll(ctypes.CDLL(None), "getpid_sites_on")
    world = wayline.open_world(url)
    client = wayline.Client(world)
    async with world, wayline.Worker(world, [bench_chain]):
        for _ in range(3):  # warm up: imports, caches, the first run's setup
            await (await client.start(bench_chain, steps)).result(timeout=120)
        on.value = 1
        for _ in range(runs):
            await (await client.start(bench_chain, steps)).result(timeout=120)
        on.value = 0


def sites(
    tree: Path, url: str, shim: Path, out: Path, steps: int, runs: int, lines: bool
) -> Counter[str]:
    """Each stack's getpid calls per step in one child importing ``tree``'s ``wayline``, its
    frames named by file and function (and line, with ``lines``: two trees' lines differ)."""
    env = {**os.environ, "LD_PRELOAD": str(shim), "GETPID_SITES_OUT": str(out)}
    env["PYTHONPATH"] = str(tree / "runtime")
    subprocess.run(
        [
            *(sys.executable, str(Path(__file__).resolve()), "--child", "--url", url),
            *("--steps", str(steps), "--runs", str(runs)),
        ],
        env=env,
        check=True,
        cwd=tempfile.gettempdir(),
    )
    prefixes = (str(tree / "runtime") + "/", sysconfig.get_paths()["stdlib"] + "/")
    counts: Counter[str] = Counter()
    for line in out.read_text().splitlines():
        for prefix in prefixes:
            line = line.replace(prefix, "")
        counts[line if lines else re.sub(r":\d+:", ":", line)] += 1
    return Counter({k: v / (steps * runs) for k, v in counts.items()})


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--worlds", default="local,nats")
    parser.add_argument("--against", help="a commit whose runtime to compare with")
    parser.add_argument("--depth", type=int, default=2, help="frames of each stack shown")
    parser.add_argument("--lines", action="store_true", help="name each frame's line too")
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        asyncio.run(child(args.url, args.steps, args.runs))
        return
    sys.path.append(str(HERE))
    from nats_server import nats_server_process
    from steady import exported

    with contextlib.ExitStack() as stack:
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="getpid-sites-")))
        shim = build_shim(tmp, args.depth)
        trees = {"this tree": HERE.parent}
        if args.against:
            trees = {args.against: stack.enter_context(exported(args.against)), **trees}
        for world in args.worlds.split(","):
            found: dict[str, Counter[str]] = {}
            for i, (name, tree) in enumerate(trees.items()):
                if world == "local":
                    url = f"sqlite:///{tmp}/{world}{i}.db?sync=normal"
                else:
                    url = stack.enter_context(nats_server_process())[0] + f"?prefix=t{i}"
                out = tmp / f"{world}{i}.txt"
                found[name] = sites(tree, url, shim, out, args.steps, args.runs, args.lines)
            print(f"\n### {world}: getpid calls per step, by the Python stack that made them\n")
            print("| stack (innermost first) | " + " | ".join(found) + " |")
            print("|---" * (len(found) + 1) + "|")
            print(
                "| (all) | " + " | ".join(f"{sum(c.values()):.2f}" for c in found.values()) + " |"
            )
            every = Counter[str]()
            for counts in found.values():
                every.update(counts)
            for stack_ in sorted(every, key=lambda s: -every[s]):
                cells = " | ".join(f"{c.get(stack_, 0.0):.2f}" for c in found.values())
                print(f"| `{stack_}` | {cells} |")


if __name__ == "__main__":
    main()
