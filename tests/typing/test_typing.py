"""Types reach the user: every file here is checked with ``mypy --strict`` as user code.

``pass_*.py`` must check clean. In ``fail_*.py`` every line marked ``# E: <text>`` must get an
error containing ``<text>`` and no other line may get one, so a decorator that erased types
again (``Any`` everywhere) fails these tests by letting the marked lines through."""

from __future__ import annotations

import functools
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
FILES = sorted(p for p in HERE.glob("*.py") if p.name.startswith(("pass_", "fail_")))
MARK = re.compile(r"#\s*E:\s*(.+?)\s*$")


def _mypy_each(paths: tuple[Path, ...]) -> dict[Path, dict[int, list[str]]]:
    """One ``mypy --strict`` over all of ``paths``: for each, its errors by line. The files
    import none of each other, so each one's errors are what a run on it alone reports (one
    run takes about a second; a run per file took 28-57 s for the 35 files here)."""
    env = {**os.environ, "MYPYPATH": str(ROOT / "runtime")}
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-error-summary", *map(str, paths)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=300,
    )
    errors: dict[Path, dict[int, list[str]]] = {path: {} for path in paths}
    for line in done.stdout.splitlines():
        found = re.match(r"(.+?):(\d+): error: (.*)", line)
        if found and (path := Path(found[1]).resolve()) in errors:
            errors[path].setdefault(int(found[2]), []).append(found[3])
    assert done.returncode in (0, 1), done.stdout + done.stderr
    return errors


def _mypy(path: Path) -> dict[int, list[str]]:
    return _mypy_each((path,))[path]


@functools.cache
def _mypy_of_files() -> dict[Path, dict[int, list[str]]]:
    """Every ``pass_``/``fail_`` file's errors, from one run shared by this process's tests."""
    return _mypy_each(tuple(FILES))


def _expected(path: Path) -> dict[int, str]:
    lines = path.read_text().splitlines()
    return {n: m[1] for n, line in enumerate(lines, 1) if (m := MARK.search(line))}


def test_there_are_files_of_both_kinds() -> None:
    assert any(p.name.startswith("pass_") for p in FILES)
    assert all(_expected(p) for p in FILES if p.name.startswith("fail_"))


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_mypy_strict_answers_as_marked(path: Path) -> None:
    expected = _expected(path)
    if path.name.startswith("pass_"):
        assert not expected, "a pass_ file has no error marks"
    errors = _mypy_of_files()[path]
    for line, text in expected.items():
        got = errors.get(line, [])
        assert any(text in e for e in got), f"{path.name}:{line}: wanted {text!r}, got {got}"
    unexpected = {n: e for n, e in errors.items() if n not in expected}
    assert not unexpected, f"{path.name}: unexpected errors {unexpected}"
