"""Two applications on one world at different versions: a parent in one application starts
a child whose workflow another application serves at a newer revision (and another shape)
than the parent's copy of it. The child is created unpinned and runs on the application that
serves it (as a Temporal child started by type name), on every world."""

from __future__ import annotations

import wayline
from tests.runtime.harness import Engine


@wayline.step(name="cross_app.kstep")
async def kstep(n: int) -> int:
    return n + 1


@wayline.step(name="cross_app.kstep2")
async def kstep2(n: int) -> int:
    return n * 10


@wayline.workflow(name="cross_app.kid")
async def kid_a(n: int) -> int:  # app A's copy of app B's child (older)
    return await kstep(n)


@wayline.workflow(name="cross_app.kid", revision=2)
async def kid_b(n: int) -> int:  # what app B runs now
    return await kstep2(await kstep(n))


@wayline.workflow(name="cross_app.parent")
async def parent(n: int) -> int:
    return await wayline.child(kid_a, n)


async def test_a_child_served_by_another_application_of_a_newer_revision(engine: Engine) -> None:
    async with engine.worker([parent]), engine.worker([kid_b], world=await engine.make_world()):
        handle = await engine.client.start(parent, 1)
        assert await handle.result(timeout=20) == 20
