"""Options apart from a workflow's arguments, on every world: ``start_with(StartOptions(...),
wf, ...)`` and ``child_with(ChildOptions(...), wf, ...)``; a workflow parameter named as an
old option keyword (``id``, ``run_id``, ``queue``, ``timeout``) reaches the workflow through the
plain ``start``/``child``; the old keywords still act as options, with a DeprecationWarning."""

from __future__ import annotations

import uuid

import pytest

import wayline
from tests.runtime.harness import Engine, wait_for
from wayline._core.events import EventType
from wayline._core.ids import new_run_id

pytestmark = pytest.mark.engine_logic  # docs/testing.md, "The pyramid"


@wayline.workflow
async def opt_echo(value: str) -> str:
    return value


@wayline.workflow
async def opt_named_as_options(order: str, id: str, run_id: str, queue: str) -> list[str]:
    return [order, id, run_id, queue]


@wayline.workflow
async def opt_kid_timeout(timeout: float) -> float:
    return timeout


@wayline.workflow
async def opt_parent_passes_timeout(timeout: float) -> float:
    return await wayline.child(opt_kid_timeout, timeout=timeout)


@wayline.workflow
async def opt_kid_waits(token: str) -> object:
    return await wayline.create_hook(token)


@wayline.workflow
async def opt_parent_old_deadline(token: str) -> str:
    try:
        await wayline.child(opt_kid_waits, token, timeout="300ms")  # the deprecated form
    except wayline.ChildTimeoutError:
        return "timed out"
    return "answered"


def _id() -> str:
    return f"order-{uuid.uuid4().hex[:8]}"


async def test_a_workflow_parameter_named_as_a_start_option_is_its_argument(
    engine: Engine,
) -> None:
    """Before, ``id=``, ``run_id=`` and ``queue=`` were taken as options whatever the workflow's
    parameters: this start was refused (``id`` with ``run_id``) and the workflow never got them."""
    async with engine.worker([opt_named_as_options]):
        handle = await engine.client.start(
            opt_named_as_options, "o-1", id="i", run_id="r", queue="q"
        )
        assert await handle.result(timeout=20) == ["o-1", "i", "r", "q"]
    info = await engine.client.get_run(handle.run_id)
    assert info.business_id is None  # no option was taken from the arguments
    [created] = [e for e in await handle.events() if e.type is EventType.RUN_CREATED]
    assert "queue" not in created.data


async def test_a_start_by_name_passes_id_to_the_workflow_as_before_business_ids(
    engine: Engine,
) -> None:
    """A client that knows no definition reads only the keywords ``start`` took as options
    before business ids (``run_id=``, ``queue=``): ``id=`` stays the workflow's argument, as it
    was, instead of quietly naming the run (every later start with that value then returned
    the first run and processed nothing)."""
    async with engine.worker([opt_named_as_options]):
        with pytest.warns(DeprecationWarning, match="run_id="):
            handle = await engine.client.start(
                "opt_named_as_options", "o-2", id="A-17", run_id=new_run_id(), queue=""
            )
        with pytest.raises(wayline.RunFailedError, match="missing a required argument"):
            await handle.result(timeout=20)  # run_id and queue were taken as options
    info = await engine.client.get_run(handle.run_id)
    assert info.business_id is None  # "A-17" did not name the run
    [created] = [e for e in await handle.events() if e.type is EventType.RUN_CREATED]
    assert created.data["input"]["kwargs"] == {"id": "A-17"}


async def test_a_child_parameter_named_timeout_is_its_argument(engine: Engine) -> None:
    """Before, ``child(wf, timeout=2.5)`` took 2.5 for the deadline and the child, which needs
    it, was refused its input."""
    async with engine.worker([opt_parent_passes_timeout, opt_kid_timeout]):
        handle = await engine.client.start(opt_parent_passes_timeout, 2.5)
        assert await handle.result(timeout=20) == 2.5
    [created] = [e for e in await handle.events() if e.type is EventType.CHILD_CREATED]
    assert "deadline" not in created.data


async def test_start_with_takes_each_option_as_the_keyword_did(engine: Engine) -> None:
    client, bid, run_id = engine.client, _id(), new_run_id()
    async with engine.worker([opt_echo]):
        by_id = await client.start_with(wayline.StartOptions(id=bid), opt_echo, "a")
        assert await by_id.result(timeout=20) == "a"
        same = await client.start_with(wayline.StartOptions(id=bid), opt_echo, "b")
        assert same.run_id == by_id.run_id  # reject_duplicate, use_existing
        with pytest.raises(wayline.RunAlreadyExistsError):
            await client.start_with(wayline.StartOptions(id=bid, id_conflict="fail"), opt_echo, "c")
        again = wayline.StartOptions(id=bid, id_reuse="allow_duplicate")
        anew = await client.start_with(again, opt_echo, "d")
        assert anew.run_id != by_id.run_id and await anew.result(timeout=20) == "d"
        pinned = await client.start_with(wayline.StartOptions(run_id=run_id), opt_echo, "e")
        assert pinned.run_id == run_id and await pinned.result(timeout=20) == "e"
    queued = await client.start_with(wayline.StartOptions(queue="gold"), opt_echo, "f")
    async with engine.worker([opt_echo]):  # a worker of no queue leaves it
        assert await engine.client.waiting_for_worker(queued.run_id) is not None
    async with engine.worker([opt_echo], queue="gold"):
        assert await queued.result(timeout=20) == "f"
    assert (await client.get_run(bid)).run_id == anew.run_id


async def test_the_old_start_keywords_still_act_as_options_and_warn(engine: Engine) -> None:
    client, bid, run_id = engine.client, _id(), new_run_id()
    with pytest.warns(DeprecationWarning, match=r"start_with\(wayline.StartOptions") as said:
        by_id = await client.start(opt_echo, "a", id=bid, id_conflict="use_existing")
    assert "id=, id_conflict=" in str(said[0].message)
    assert said[0].filename == __file__  # it points at the caller's line
    with pytest.warns(DeprecationWarning):
        pinned = await client.start(opt_echo, "b", run_id=run_id)
    with pytest.warns(DeprecationWarning):
        queued = await client.start(opt_echo, "c", queue="gold")
    with pytest.warns(DeprecationWarning):  # by a name this client has no definition for
        named = await client.start("opt_echo", "d", queue="gold")
    assert (await client.get_run(bid)).run_id == by_id.run_id and pinned.run_id == run_id
    async with engine.worker([opt_echo], queue="gold"):
        assert await queued.result(timeout=20) == "c" and await named.result(timeout=20) == "d"
    async with engine.worker([opt_echo]):
        assert await by_id.result(timeout=20) == "a" and await pinned.result(timeout=20) == "b"


async def test_the_old_child_timeout_keyword_still_is_a_deadline_and_warns(
    engine: Engine,
) -> None:
    with pytest.warns(DeprecationWarning, match=r"child_with\(wayline.ChildOptions"):
        async with engine.worker([opt_parent_old_deadline, opt_kid_waits]):
            handle = await engine.client.start(opt_parent_old_deadline, "opt-late")
            assert await handle.result(timeout=15) == "timed out"
            await wait_for(lambda: engine.world.get_hook("opt-late"))
            await engine.client.resume_hook("opt-late", "late")


async def test_bad_options_are_refused_as_they_are_made_and_nothing_is_written(
    engine: Engine,
) -> None:
    with pytest.raises(wayline.InvalidIdError, match="neither starts nor ends with a space"):
        wayline.StartOptions(id=" order-1")
    with pytest.raises(wayline.InvalidIdError, match="id_conflict is one of"):
        wayline.StartOptions(id="order-1", id_conflict="replace")  # type: ignore[arg-type]
    with pytest.raises(wayline.InvalidIdError, match="not both"):
        wayline.StartOptions(id="order-1", run_id=new_run_id())
    with pytest.raises(ValueError, match="not a duration"):
        wayline.ChildOptions(timeout="soon")
    with pytest.raises(ValueError, match="non-negative"):
        wayline.ChildOptions(timeout=-1)
    # the old keywords are refused with the same errors, before anything is written
    with pytest.warns(DeprecationWarning), pytest.raises(wayline.InvalidIdError, match="1 to"):
        await engine.client.start(opt_echo, "a", id="")
    with pytest.raises(TypeError, match="StartOptions first"):
        await engine.client.start_with({"id": "order-1"}, opt_echo, "a")  # type: ignore[call-overload]
    assert await engine.client.list_runs() == []
