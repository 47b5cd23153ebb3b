"""What recording a typed hook's shape costs (``wayline._sdk.hooks.shape``, once per class and
process, when a workflow first creates a hook of that class): this tree's recorder against an
older commit's, alternating within each round, for models that contain themselves (a linked
list, a binary tree, a recursive discriminated union), a model nested six levels deep and lists
of lists, and classes whose levels fill the budget (Wide100, Wide300: 17 models of 100 or 300
fields each; WideTop: 2,000 fields beside a chain 16 deep) or that contain themselves 30
times (Bushy). Prints, per class, each recorder's milliseconds (min-max over the rounds), the ratio
new/old within each round, the shape's bytes and the levels of ``nested`` it follows.

    .venv/bin/python -m bench.hook_shapes --old 5b33da8 --rounds 5
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType
from typing import Annotated, Any, Literal, Optional

import pydantic

from wayline._sdk import hooks as new_hooks


class Chain(pydantic.BaseModel):
    value: int
    next: Chain | None = None


class Tree(pydantic.BaseModel):
    value: int
    left: Tree | None = None
    right: Tree | None = None


class Leaf(pydantic.BaseModel):
    op: Literal["leaf"]
    value: int


class Pair(pydantic.BaseModel):
    op: Literal["sum", "product"]
    left: Term
    right: Term


class Flip(pydantic.BaseModel):
    op: Literal["flip"]
    arg: Term


Term = Annotated[Leaf | Pair | Flip, pydantic.Field(discriminator="op")]
Pair.model_rebuild()
Flip.model_rebuild()


class Sheet(pydantic.BaseModel):
    term: Term


def _nested(levels: int) -> type[Any]:
    """A model whose one field is a model, ``levels`` deep, the last holding a string."""
    model: type[Any] = pydantic.create_model("Level0", code=(str, ...))
    for level in range(1, levels + 1):
        name = "Deep" if level == levels else f"Level{level}"
        model = pydantic.create_model(name, down=(model, ...))
    return model


Deep = _nested(5)


class Cell(pydantic.BaseModel):
    x: int


class Grid(pydantic.BaseModel):
    rows: list[list[int]]
    cells: list[list[Cell]]


def _wide(fields: int) -> type[Any]:
    """17 models, each holding the next and ``fields`` integers: a class as deep as the
    recorder follows, whose levels fill its budget (Wide100 fits all 16, Wide300 about 10)."""
    model: type[Any] = pydantic.create_model(
        f"Wide{fields}Level16", **{f"n{j:03d}": (int, 0) for j in range(fields)}
    )
    for level in range(15, -1, -1):
        spec: dict[str, Any] = {f"n{j:03d}": (int, 0) for j in range(fields)}
        name = f"Wide{fields}" if level == 0 else f"Wide{fields}Level{level}"
        model = pydantic.create_model(name, inner=(model, ...), **spec)
    return model


Wide100, Wide300 = _wide(100), _wide(300)

WideTop = pydantic.create_model(  # 2,000 integers beside a chain of 16 one-field models
    "WideTop", chain=(_nested(16), ...), **{f"n{j:04d}": (int, 0) for j in range(2000)}
)

Bushy = pydantic.create_model(  # a model that contains itself 30 times
    "Bushy", **{f"f{i:02d}": (Optional["Bushy"], None) for i in range(30)}
)
Bushy.model_rebuild()

CLASSES: list[type[Any]] = [Chain, Tree, Sheet, Deep, Grid, Wide100, Wide300, WideTop, Bushy]


def _old(rev: str) -> ModuleType:
    """The recorder of ``rev``, loaded beside this tree's ``wayline._sdk`` (its imports are
    relative to it)."""
    source = subprocess.run(
        ["git", "show", f"{rev}:runtime/wayline/_sdk/hooks.py"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    path = Path(tempfile.mkdtemp(prefix="hook-shapes-")) / "old_hooks.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("wayline._sdk.old_hooks", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    path.unlink()
    path.parent.rmdir()
    return module


def _levels(recorded: dict[str, Any]) -> int:
    """How many levels of models (nested, or a union's branches) the shape follows."""
    inner = list((recorded.get("nested") or {}).values())
    for union in (recorded.get("unions") or {}).values():
        inner += [branch["shape"] for branch in union["branches"]]
    return max([1 + _levels(shape) for shape in inner] + [0])


def _ms(module: ModuleType, cls: type[Any]) -> tuple[float, dict[str, Any]]:
    schema = module._schema(cls)  # not timed: pydantic's own, the same for both
    start = time.perf_counter()
    recorded: dict[str, Any] = module._bounded(schema)
    return (time.perf_counter() - start) * 1000, recorded


def _span(values: list[float]) -> str:
    return f"{min(values):.2f}-{max(values):.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--old", default="5b33da8")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    old = _old(args.old)
    columns = ["class", f"{args.old} ms", "this tree ms", "ratio new/old", "bytes", "levels"]
    print("| " + " | ".join(columns) + " |")
    print("|---|---|---|---|---|---|")
    for cls in CLASSES:
        olds: list[float] = []
        news: list[float] = []
        ratios: list[float] = []
        for _ in range(args.rounds):
            was, old_shape = _ms(old, cls)
            now, new_shape = _ms(new_hooks, cls)
            olds.append(was)
            news.append(now)
            ratios.append(now / was)
        sizes = f"{len(json.dumps(old_shape))}/{len(json.dumps(new_shape))}"
        levels = f"{_levels(old_shape)}/{_levels(new_shape)}"
        print(
            f"| {cls.__name__} | {_span(olds)} | {_span(news)} | {_span(ratios)} | {sizes} "
            f"| {levels} |"
        )


if __name__ == "__main__":
    main()
