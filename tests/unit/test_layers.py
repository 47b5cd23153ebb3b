"""The layering contract (CONVENTIONS "Layers that a tool can check"), checked by import-linter.

The contracts live in ``pyproject.toml`` (``[tool.importlinter]``): operator > cli > worker |
client > engine | worlds > world seam > sdk > settings > core > errors > durations; the two
worlds independent; ``nats``, ``sqlite3`` and ``kopf`` imported only in their own package.
These tests run the real tool, prove that it fails on a back-edge (a plain one and one hidden
under ``if TYPE_CHECKING:``), and that no module of the package escapes the layers."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PKG = ROOT / "runtime" / "wayline"
LINT = Path(sys.executable).parent / "lint-imports"


def _contracts() -> list[dict[str, object]]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    contracts: list[dict[str, object]] = config["contracts"]
    return contracts


def _layer_modules(container: str | None = None) -> set[str]:
    """The modules named by the layers contract of ``container`` (None: the top one)."""
    (layers,) = [
        c
        for c in _contracts()
        if c["type"] == "layers" and (c.get("containers") or [None])[0] == container  # type: ignore[index]
    ]
    names: set[str] = set()
    for layer in layers["layers"]:  # type: ignore[union-attr]
        names |= {part.strip() for part in str(layer).split("|")}
    return names


def _lint(pythonpath: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = None
    if pythonpath is not None:
        env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(pythonpath)}
    return subprocess.run(
        [str(LINT), "--no-logo", "--no-cache", str(ROOT / "pyproject.toml")],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=120,
    )


def test_the_import_contracts_hold() -> None:
    done = _lint()
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 broken" in done.stdout


def test_every_module_of_the_package_is_in_a_layer() -> None:
    """A new module or folder cannot escape the contracts: each must be placed in a layer."""
    layered = _layer_modules()
    for path in PKG.iterdir():
        if path.name in {"__init__.py", "py.typed", "__pycache__"}:
            continue
        name = "wayline." + path.name.removesuffix(".py")
        assert name in layered, f"{name} is in no layer of [tool.importlinter]"
    for package in ("_engine", "_core"):
        inner = _layer_modules(f"wayline.{package}")
        for path in (PKG / package).glob("*.py"):
            if path.name != "__init__.py":
                assert path.stem in inner, f"wayline.{package}.{path.stem} is in no layer"


@pytest.mark.parametrize(
    ("module", "line", "edge"),
    [
        ("_core/events.py", "from wayline.cli import main", "wayline._core.events -> wayline.cli"),
        (
            "_sdk/workflow_api.py",
            "import typing\nif typing.TYPE_CHECKING:\n    from wayline._engine import handler",
            "wayline._sdk.workflow_api -> wayline._engine.handler",
        ),
        ("world/seam.py", "import wayline.worlds.local", "wayline.world.seam -> wayline.worlds"),
        ("worlds/local/holders.py", "import nats", "wayline.worlds.local.holders -> nats"),
    ],
    ids=["core-imports-cli", "type-checking-back-edge", "seam-imports-a-world", "nats-outside"],
)
def test_a_back_edge_breaks_the_contracts(
    tmp_path: Path, module: str, line: str, edge: str
) -> None:
    """The checker can fail: a copy of the package with one added edge is refused."""
    shutil.copytree(PKG, tmp_path / "wayline", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(ROOT / "operator" / "wayline_operator", tmp_path / "wayline_operator")
    target = tmp_path / "wayline" / module
    target.write_text(target.read_text() + "\n" + line + "\n")
    done = _lint(tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert edge in done.stdout, done.stdout
