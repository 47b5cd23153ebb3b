"""No function over 80 lines in the engine and the core (CONVENTIONS; the issue "One coherent
layout"): the flow loop is a pure planner plus a small executor, not one long function."""

from __future__ import annotations

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parents[2] / "runtime" / "wayline"
LIMIT = 80
CHECKED = [PKG / "_engine", PKG / "_core", PKG / "worker.py", PKG / "client.py"]


def long_functions(path: Path, limit: int = LIMIT) -> list[str]:
    tree = ast.parse(path.read_text())
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            assert node.end_lineno is not None
            lines = node.end_lineno - node.lineno + 1
            if lines > limit:
                found.append(f"{path.name}:{node.lineno} {node.name} ({lines} lines)")
    return found


def _sources() -> list[Path]:
    out: list[Path] = []
    for place in CHECKED:
        out += sorted(place.rglob("*.py")) if place.is_dir() else [place]
    return out


def test_no_engine_or_core_function_is_over_80_lines() -> None:
    sources = _sources()
    assert any(p.name == "handler.py" for p in sources)
    found = [f for p in sources for f in long_functions(p)]
    assert not found, found


def test_the_checker_sees_a_long_function(tmp_path: Path) -> None:
    body = "\n".join(f"    x{i} = {i}" for i in range(LIMIT))
    source = tmp_path / "m.py"
    source.write_text(f"async def long() -> None:\n{body}\n\n\ndef short() -> None:\n    pass\n")
    assert long_functions(source) == [f"m.py:1 long ({LIMIT + 1} lines)"]
