"""Definition identity (seed 004, "Definition identity").

A workflow's identity is a SHA-256 over its canonically serialised shape: its name and the steps
(with their options and whether they compensate) and child workflows its code refers to, found
by walking the function's code objects and resolving the names they use. The author's explicit
``revision`` is recorded beside it, for behaviour changes that do not change the shape, and so
is a hash of the code itself, which is enforced only with ``strict_identity=True``: a harmless
fix can still reach a month-long run, while replay divergence catches a harmful one. A
workflow's older shapes, without what only its ``patched`` branches use (``patch_scopes``), are
identities its workers serve too.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import types
from collections.abc import Callable, Mapping
from typing import Any, Protocol


class Declared(Protocol):
    """What identity needs of a workflow definition (``definitions`` supplies the real one)."""

    @property
    def name(self) -> str: ...
    @property
    def fn(self) -> Callable[..., Any]: ...


Entry = tuple[str, str, dict[str, Any]]
"""``("step", name, options)`` or ``("workflow", name, {})``: what a referenced value is."""


def _names(code: types.CodeType) -> set[str]:
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _names(const)
    return names


def _package(module: str | None) -> str:
    return (module or "").split(".", 1)[0]


def shape(
    workflow: Declared,
    entry: Callable[[Any], Entry | None],
    leave_out: frozenset[str] = frozenset(),
) -> dict[str, Any]:
    """Steps and children the workflow's code refers to: by name, as attributes of modules
    and classes it names (``payments.charge``), and through plain helper functions of its own
    top-level package (followed to a bounded depth). ``entry`` tells a step or workflow
    definition from any other value. ``leave_out``: names of the workflow function itself
    not to follow (those it uses only inside ``patched`` branches, for an older shape)."""

    steps: dict[str, dict[str, Any]] = {}
    children: set[str] = set()
    seen: set[int] = set()
    home = _package(workflow.fn.__module__)

    def visit(value: Any, names: list[str], depth: int, nesting: int = 0) -> None:
        found = entry(value)
        if found is not None:
            kind, name, options = found
            if kind == "step":
                steps[name] = options
            elif value is not workflow:
                children.add(name)
        elif inspect.isfunction(value):
            if _package(value.__module__) == home:
                walk(value, depth + 1)
        elif isinstance(value, types.ModuleType | type) and nesting < 3:
            # ``module.attr``: the attribute names are among the code's names too. Read the
            # namespace itself (no module __getattr__, no descriptors). A class's is a
            # mappingproxy, not the dict that ``vars`` is typed to return: read through Any, or
            # the mypyc build (tools/mypyc_build.py) refuses it where a dict is expected.
            namespace: Any = value
            space: Mapping[str, Any] = namespace.__dict__
            for name in names:
                if name in space:
                    visit(space[name], names, depth, nesting + 1)

    def walk(fn: Any, depth: int) -> None:
        code = getattr(fn, "__code__", None)
        if code is None or id(code) in seen or depth > 4:
            return
        seen.add(id(code))
        scope = {**fn.__globals__, **inspect.getclosurevars(fn).nonlocals}
        names = sorted(_names(code) - (leave_out if depth == 0 else frozenset()))
        for name in names:
            if name in scope:
                visit(scope[name], names, depth)

    walk(workflow.fn, 0)
    return {"workflow": workflow.name, "steps": steps, "children": sorted(children)}


def digest(shape: dict[str, Any]) -> str:
    canonical = json.dumps(shape, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


def code_hash(workflow: Declared) -> str:
    try:
        text = inspect.getsource(workflow.fn).encode()
    except (OSError, TypeError):
        text = workflow.fn.__code__.co_code
    return hashlib.sha256(text).hexdigest()
