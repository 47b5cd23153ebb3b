"""The opt-in mypyc build of ``wayline._core`` (``make mypyc``, tools/mypyc_build.py): a process
that puts the build first on its path imports the compiled modules and runs a workflow with
them, and a copy of the build without its compiled modules falls back to their source.

The build takes minutes of C compilation, so these tests are not collected by ``make test``
(pyproject's addopts leave tests/mypyc out): ``make mypyc`` builds and then runs them on the
build it left in ``build/mypyc`` (or the folder ``WAYLINE_MYPYC_BUILD`` names), and without a
build they fail, never skip.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# Runs in a child whose path starts with the tree under test: prints where each module of
# wayline._core came from, then runs a workflow of two steps on a SQLite world to its end.
CHILD = """
import asyncio, pkgutil, sys, importlib
import wayline
import wayline._core as core

names = [m.name for m in pkgutil.iter_modules(core.__path__)]
for name in sorted(set(names)):
    module = importlib.import_module(f"wayline._core.{name}")
    print("module", name, module.__file__)

@wayline.step
async def mypyc_build_add(a: int, b: int) -> int:
    return a + b

@wayline.workflow
async def mypyc_build_flow(n: int) -> int:
    first = await mypyc_build_add(n, 1)
    return await mypyc_build_add(first, 2)

async def main() -> None:
    world = wayline.open_world(f"sqlite:///{sys.argv[1]}/mypyc.db")
    client = wayline.Client(world)
    async with world, wayline.Worker(world, [mypyc_build_flow]):
        handle = await client.start(mypyc_build_flow, 10)
        print("result", await handle.result(timeout=60))

asyncio.run(main())
"""


@pytest.fixture
def built() -> Path:
    tree = Path(os.environ.get("WAYLINE_MYPYC_BUILD", ROOT / "build" / "mypyc")) / "runtime"
    if not list(tree.glob("wayline/_core/*.so")):
        pytest.fail(f"no mypyc build in {tree}: run make mypyc", pytrace=False)
    return tree


def run_child(tree: Path, tmp_path: Path) -> tuple[dict[str, str], str]:
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(tmp_path)],
        env={**os.environ, "PYTHONPATH": str(tree)},
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    modules = {}
    result = ""
    for line in done.stdout.splitlines():
        kind, _, rest = line.partition(" ")
        if kind == "module":
            name, _, where = rest.partition(" ")
            modules[name] = where
        elif kind == "result":
            result = rest
    return modules, result


def test_the_compiled_core_is_what_a_process_imports_when_built(
    built: Path, tmp_path: Path
) -> None:
    modules, result = run_child(built, tmp_path)
    assert modules, "no module of wayline._core listed"
    source = {m for m, where in modules.items() if not where.endswith(".so")}
    assert source == set(), f"imported from source, not compiled: {sorted(source)}"
    assert all(where.startswith(str(built)) for where in modules.values())
    assert result == "13"


def test_a_build_without_its_compiled_modules_falls_back_to_their_source(
    built: Path, tmp_path: Path
) -> None:
    copy = tmp_path / "runtime"
    shutil.copytree(built, copy, ignore=shutil.ignore_patterns("__pycache__"))
    for compiled in copy.rglob("*.so"):
        compiled.unlink()
    modules, result = run_child(copy, tmp_path)
    assert modules
    compiled = {m for m, where in modules.items() if not where.endswith(".py")}
    assert compiled == set(), f"not imported from source: {sorted(compiled)}"
    assert all(where.startswith(str(copy)) for where in modules.values())
    assert result == "13"
