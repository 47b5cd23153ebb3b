"""An opt-in build of Wayline's pure core (``wayline._core``) with mypyc, outside the source tree.

    python tools/mypyc_build.py [--out build/mypyc] [--module wayline/_core/planning.py ...]

The build copies ``runtime/wayline`` to ``OUT/runtime/wayline`` and compiles the modules named
(by default every module of ``wayline/_core``) in the copy, so the copy holds each compiled
module (``planning.cpython-311-x86_64-linux-gnu.so``) beside its source and mypyc's shared
library (``<hash>__mypyc.cpython-311-x86_64-linux-gnu.so``) in ``OUT/runtime``. A process uses
it when ``OUT/runtime`` comes first on its path (``PYTHONPATH=build/mypyc/runtime``); any
other process imports the pure modules of ``runtime/wayline`` as before, so the source tree
never holds a compiled module that an edit of its source could leave stale
(docs/performance.md, Compiling the core with mypyc).

Python prefers an extension module to a source file of the same name in one folder, so the
copy's modules that were not compiled are imported from their source: that is the fallback.
The build prints how long it took; it needs a C compiler and Python's headers.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# What mypyc compiles: the pure core, which ``mypy --strict`` already checks. Nothing of it is
# left out today; a module that mypyc refuses goes here with the reason (docs/performance.md).
CORE = "wayline/_core"
LEFT_OUT: dict[str, str] = {}


def core_modules() -> list[str]:
    found = sorted(p.relative_to(ROOT / "runtime") for p in (ROOT / "runtime" / CORE).glob("*.py"))
    return [str(p) for p in found if str(p) not in LEFT_OUT]


def build(out: Path, modules: list[str]) -> float:
    """Copy the runtime into ``out`` and compile ``modules`` there; the seconds it took."""
    started = time.monotonic()
    tree = out / "runtime"
    if tree.exists():
        shutil.rmtree(tree)
    shutil.copytree(
        ROOT / "runtime" / "wayline",
        tree / "wayline",
        ignore=shutil.ignore_patterns("__pycache__", "*.so"),
    )
    # mypyc type-checks the modules as mypy does (strict, as the repository's config), then
    # writes C into ``tree/build`` and builds it in place (``build_ext --inplace``).
    subprocess.run(
        [sys.executable, "-m", "mypyc", "--strict", *modules],
        cwd=tree,
        check=True,
    )
    shutil.rmtree(tree / "build")  # C sources and object files: not needed to import
    compiled = sorted(tree.glob(f"{CORE}/*.so"))
    if len(compiled) != len(modules):
        raise SystemExit(f"compiled {len(compiled)} modules, expected {len(modules)}")
    return time.monotonic() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "build" / "mypyc")
    parser.add_argument(
        "--module",
        action="append",
        default=[],
        help="a module to compile, as a path under runtime/ (default: all of wayline/_core)",
    )
    args = parser.parse_args()
    modules = args.module or core_modules()
    seconds = build(args.out.resolve(), modules)
    print(
        f"compiled {len(modules)} modules in {seconds:.0f} s into {args.out}/runtime; "
        f"use it with PYTHONPATH={args.out}/runtime"
    )


if __name__ == "__main__":
    main()
