"""Which names a workflow's code uses only inside ``if wayline.patched(...)`` branches.

A run started before a patch never takes its branch (``patched`` answers False on history
written before it), so the steps and children that branch alone refers to are not part of the
definition such a run needs. ``definitions`` uses this to name the older identities a worker
can still serve (docs/durability.md, "Adding a step to a live workflow").

The analysis reads the workflow function's own source (not its helpers): a branch is the body
of an ``if`` whose test is ``patched("id")`` or ``wayline.patched("id")`` with a literal id, or
the ``else`` of ``if not patched("id")``, or what follows ``if not patched("id"): ... return``
in the same block. Anything else (an ``and``, a variable id, no source)
counts as unconditional, which only ever serves fewer identities, never a wrong one.
"""

from __future__ import annotations

import ast
import inspect
import textwrap
from collections.abc import Callable, Iterator
from itertools import combinations
from typing import Any

Scope = frozenset[str]
"""The patch ids whose branches enclose one use of a name (empty: used unconditionally)."""


def _patch_id(test: ast.expr) -> tuple[str, bool] | None:
    """``("id", True)`` for ``patched("id")``, ``("id", False)`` for ``not patched("id")``."""
    negated = isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not)
    call = test.operand if isinstance(test, ast.UnaryOp) and negated else test
    if not isinstance(call, ast.Call) or len(call.args) != 1 or call.keywords:
        return None
    func = call.func
    name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
    arg = call.args[0]
    if name != "patched" or not isinstance(arg, ast.Constant) or not isinstance(arg.value, str):
        return None
    return arg.value, not negated


def _block(statements: list[ast.stmt], scope: Scope) -> Iterator[tuple[str, Scope]]:
    """The uses in a statement list. After ``if not patched("id"): ... return``, the rest of
    the list is the patched branch (the early-return form of an ``else``)."""
    for i, statement in enumerate(statements):
        found = _patch_id(statement.test) if isinstance(statement, ast.If) else None
        if isinstance(statement, ast.If) and found is not None:
            patch, positive = found
            inner = scope | {patch}
            yield from _uses(statement.test, scope)
            yield from _block(statement.body, inner if positive else scope)
            yield from _block(statement.orelse, scope if positive else inner)
            ends = bool(statement.body) and isinstance(statement.body[-1], ast.Return | ast.Raise)
            if not positive and ends and not statement.orelse:
                yield from _block(statements[i + 1 :], inner)
                return
        else:
            yield from _uses(statement, scope)


def _uses(node: ast.AST, scope: Scope) -> Iterator[tuple[str, Scope]]:
    """Every name (``x``) and attribute (``.x``) under ``node``, with its enclosing patches."""
    if isinstance(node, ast.Name):
        yield node.id, scope
    elif isinstance(node, ast.Attribute):
        yield node.attr, scope
    for field in ast.iter_fields(node):
        value = field[1]
        if isinstance(value, list) and value and all(isinstance(v, ast.stmt) for v in value):
            yield from _block(value, scope)
        elif isinstance(value, list):
            for item in value:
                if isinstance(item, ast.AST):
                    yield from _uses(item, scope)
        elif isinstance(value, ast.AST):
            yield from _uses(value, scope)


def scopes(fn: Callable[..., Any]) -> dict[str, set[Scope]]:
    """For each name the function's body uses, the scopes of its uses ({} without source)."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
    except (OSError, TypeError, SyntaxError):
        return {}
    func = next(
        (n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)),
        None,
    )
    if func is None:
        return {}
    found: dict[str, set[Scope]] = {}
    for name, scope in _block(func.body, frozenset()):  # not the decorators: not its code
        found.setdefault(name, set()).add(scope)
    return found


def without(found: dict[str, set[Scope]], patches: Scope) -> frozenset[str]:
    """The names every use of which is inside a branch of one of ``patches``: what the code
    refers to only when one of those patches is taken."""
    return frozenset(name for name, uses in found.items() if all(scope & patches for scope in uses))


def older_shapes(found: dict[str, set[Scope]], most: int) -> list[frozenset[str]]:
    """The name sets to leave out for each combination of patches not yet taken: a run may
    predate any of them (one added in March, another in May), so every combination of the
    patches whose branches alone use a name is one older shape. None when no patch does.
    ``ValueError`` past ``most`` such patches (2**most routes per workflow)."""
    patches = sorted({p for uses in found.values() for scope in uses for p in scope})
    useful = [p for p in patches if without(found, frozenset({p}))]
    if len(useful) > most:
        raise ValueError(
            f"{len(useful)} patches add steps or children ({', '.join(useful)}); a worker "
            f"serves the runs that predate at most {most}: once no live run predates a "
            "patch, make its branch unconditional (remove the patched() call)"
        )
    out: list[frozenset[str]] = []
    for size in range(1, len(useful) + 1):
        for combo in combinations(useful, size):
            out.append(without(found, frozenset(combo)))
    return out
