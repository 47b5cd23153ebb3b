"""What a ``wayline.patched(...)`` branch alone uses: left out of a workflow's older shapes."""

from __future__ import annotations

import pytest

import wayline
from wayline._core import patch_scopes

# The shapes below are judged by their source, so they are module-level functions.


@wayline.step
async def pv_base(n: int) -> int:
    return n


@wayline.step
async def pv_new(n: int) -> int:
    return n + 1


@wayline.step
async def pv_other(n: int) -> int:
    return n + 2


@wayline.workflow(name="pv_negated")
async def negated(n: int) -> int:
    if not wayline.patched("p"):
        return await pv_base(n)
    return await pv_new(n)


@wayline.workflow(name="pv_both", strict_identity=True)
async def strict(n: int) -> int:
    if wayline.patched("p"):
        n = await pv_new(n)
    return await pv_base(n)


@wayline.workflow(name="pv_two")
async def two_patches(n: int) -> int:
    if wayline.patched("p"):
        n = await pv_new(n)
    if wayline.patched("q"):
        n = await pv_other(n)
    return await pv_base(n)


def test_what_a_patched_branch_alone_uses_is_left_out() -> None:
    found = patch_scopes.scopes(negated.fn)
    assert "pv_new" in patch_scopes.without(found, frozenset({"p"}))  # else of `not patched`
    assert "pv_base" not in patch_scopes.without(found, frozenset({"p"}))
    # every combination of two patches is an older shape a run may be pinned to
    assert len(set(two_patches.identities)) == 4
    assert strict.identities == (strict.identity,)  # the code is part of a strict pin


def test_more_patches_than_a_worker_serves_is_a_clear_error() -> None:
    found = {f"s{i}": {frozenset({f"p{i}"})} for i in range(5)}
    with pytest.raises(ValueError, match="5 patches add steps or children"):
        patch_scopes.older_shapes(found, 4)


@wayline.workflow(name="pv_retired")
async def retired(n: int) -> int:
    n = await pv_new(n)  # the patch of ``pv_patched`` made unconditional
    return await pv_base(n)


@wayline.workflow(name="pv_retired")
async def pv_patched(n: int) -> int:
    if wayline.patched("p"):
        n = await pv_new(n)
    return await pv_base(n)


def test_a_retired_patch_keeps_the_identity_of_the_runs_that_took_it() -> None:
    """Making a branch unconditional once no run predates it: the runs pinned to the patched
    code (which took the branch) are served by the new code, the older ones no longer."""
    assert retired.identity == pv_patched.identity
    assert retired.identities == (retired.identity,)
    assert len(pv_patched.identities) == 2
