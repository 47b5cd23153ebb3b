"""The layering contract (CONVENTIONS "Layers that a tool can check"), checked on the source.

SDK and core (events, replay, dispatch, handler, worker, client) never import the CLI or a
concrete world; only ``worlds/nats`` imports ``nats``; only ``worlds/local`` touches ``sqlite3``;
the CLI is on top. The operator, when it exists, sits above all of it and is never imported."""

from __future__ import annotations

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parents[2] / "runtime" / "wayline"


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    module = ".".join(path.relative_to(PKG.parent).with_suffix("").parts)
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".")
                if path.name != "__init__.py":
                    base = base[:-1]
                base = base[: len(base) - node.level + 1]
                name = ".".join([*base, node.module] if node.module else base)
            else:
                name = node.module or ""
            found.add(name)
            found |= {f"{name}.{alias.name}" for alias in node.names}
    return found


def _modules() -> dict[str, set[str]]:
    return {
        str(p.relative_to(PKG)): _imports(p)
        for p in PKG.rglob("*.py")
        if "__pycache__" not in p.parts
    }


def test_only_the_nats_world_imports_nats() -> None:
    for name, imports in _modules().items():
        if not name.startswith("worlds/nats/"):
            assert not any(i == "nats" or i.startswith("nats.") for i in imports), name


def test_only_the_local_world_touches_sqlite() -> None:
    for name, imports in _modules().items():
        if not name.startswith("worlds/local/"):
            assert "sqlite3" not in imports, name


def test_the_core_imports_neither_the_cli_nor_a_concrete_world() -> None:
    core = {
        "events.py",
        "replay.py",
        "dispatch.py",
        "handler.py",
        "worker.py",
        "client.py",
        "definitions.py",
        "futures.py",
        "serde.py",
        "step_runner.py",
        "single_flight.py",
        "world.py",
        "workflow_api.py",
        "context.py",
        "identity.py",
        "settings.py",
    }
    for name, imports in _modules().items():
        if name in core:
            assert not any(i.startswith("wayline.cli") for i in imports), name
            assert not any(i.startswith("wayline.worlds.") for i in imports), name


def test_no_module_imports_the_operator() -> None:
    for name, imports in _modules().items():
        assert not any(i.startswith("wayline_operator") for i in imports), name


def test_the_checker_sees_imports() -> None:
    """The checker itself can fail: it finds the imports a module really has."""
    imports = _modules()["worlds/local/world.py"]
    assert "sqlite3" in imports and "wayline.world" in imports
    assert any(
        i.startswith("nats")
        for i in _modules()["worlds/nats/world.py"]
        | set().union(*(v for k, v in _modules().items() if k.startswith("worlds/nats/")))
    )
