"""Search attributes on every world: set at a start (``StartOptions(attributes=...)``,
``@workflow(attributes=...)``) and by the workflow (``wayline.set_attributes``, recorded once
in the log however often the run is replayed), typed, checked, and found again by
``Client.list_runs(where=..., status=..., since=..., workflow=...)``."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

import wayline
from tests.runtime.harness import Engine, of_type, wait_for
from wayline._core.events import EventType, NewEvent


@wayline.workflow(attributes={"team": "billing", "tier": 1})
async def sa_orders(tenant: str, amount: float) -> str:
    wayline.set_attributes(tenant=tenant, amount=amount, stage="received")
    token = await wayline.create_hook(f"sa-{wayline.workflow_info().run_id}")
    if amount < 0:
        raise wayline.FatalError("a refund is not an order")
    wayline.set_attributes(stage="paid", tags=["paid", str(token)], note=None)
    return tenant


@wayline.workflow
async def sa_plain(n: int) -> int:
    return n


@wayline.workflow
async def sa_bad_value() -> None:
    wayline.set_attributes(when=datetime(2026, 1, 1))  # no timezone: refused at the call


def _opts(**attributes: Any) -> wayline.StartOptions:
    return wayline.StartOptions(attributes=attributes)


async def _ids(engine: Engine, *where: str, **kw: Any) -> set[str]:
    return {r.run_id for r in await engine.client.list_runs(where=list(where), **kw)}


async def test_typed_values_given_at_a_start_are_shown_and_found(engine: Engine) -> None:
    client = engine.client
    when = datetime(2026, 12, 1, 9, 30, tzinfo=UTC)
    a = await client.start_with(
        _opts(tenant="acme", amount=150, ratio=0.5, vip=True, due=when, tags=["eu", "new"]),
        sa_plain,
        1,
    )
    b = await client.start_with(
        _opts(tenant="globex", amount=99.5, vip=False, due=when + timedelta(days=2)), sa_plain, 2
    )
    c = await client.start(sa_plain, 3)  # no attributes at all
    info = await client.get_run(a.run_id)
    assert info.search_attributes == {
        "tenant": "acme",
        "amount": 150,
        "ratio": 0.5,
        "vip": True,
        "due": when,
        "tags": ["eu", "new"],
    }
    assert (await client.get_run(c.run_id)).search_attributes == {}
    # every operator, typed: numbers as numbers, datetimes as times, a list by its items
    assert await _ids(engine, "tenant=acme") == {a.run_id}
    assert await _ids(engine, "tenant!=acme") == {b.run_id}
    assert await _ids(engine, "amount>100") == {a.run_id}
    assert await _ids(engine, "amount>=99.5") == {a.run_id, b.run_id}
    assert await _ids(engine, "amount<150") == {b.run_id}
    assert await _ids(engine, "amount<=150", "amount>=150") == {a.run_id}
    assert await _ids(engine, "vip=true") == {a.run_id}
    assert await _ids(engine, "vip!=true") == {b.run_id}
    assert await _ids(engine, "due>2026-12-02") == {b.run_id}
    assert await _ids(engine, "due=2026-12-01T09:30:00+00:00") == {a.run_id}
    assert await _ids(engine, "tags=eu") == {a.run_id}
    assert await _ids(engine, "tags!=eu") == set()
    assert await _ids(engine, "tenant=acme", "amount>200") == set()
    assert await _ids(engine, "amount=150") == {a.run_id}
    assert await _ids(engine, 'amount="150"') == set()  # a string never equals a number
    assert await _ids(engine, "missing=x") == set()


async def test_a_workflows_attributes_are_the_default_of_each_start(engine: Engine) -> None:
    client = engine.client
    run = await client.start_with(_opts(tier=2, region="eu"), sa_orders, "acme", 10.0)
    assert (await client.get_run(run.run_id)).search_attributes == {
        "team": "billing",
        "tier": 2,
        "region": "eu",
    }
    plain = await client.start(sa_orders, "acme", 10.0)
    assert (await client.get_run(plain.run_id)).search_attributes == {"team": "billing", "tier": 1}
    assert await _ids(engine, "tier=2") == {run.run_id}
    assert await _ids(engine, "team=billing") == {run.run_id, plain.run_id}


async def test_set_attributes_is_recorded_once_and_a_replay_writes_it_again_never(
    engine: Engine,
) -> None:
    """The first worker runs the workflow to its hook and stops; a second one replays the
    whole log from the start (a new process would), resumes, and ends the run. Each call of
    ``set_attributes`` is one ``attributes_set`` in the log, and the run holds the values of
    the last call."""
    client = engine.client
    run = await client.start(sa_orders, "acme", 250.0)
    async with engine.worker([sa_orders]):

        async def at_hook() -> bool:
            events = await engine.world.list_events(run.run_id)
            return bool(of_type(events, EventType.HOOK_CREATED))

        await wait_for(at_hook, timeout=20)
    stored = (await client.get_run(run.run_id)).search_attributes
    assert stored == {
        "team": "billing",
        "tier": 1,
        "tenant": "acme",
        "amount": 250.0,
        "stage": "received",
    }
    assert await _ids(engine, "stage=received") == {run.run_id}
    second = await engine.make_world()  # another process: nothing of the first one's replay
    async with engine.worker([sa_orders], world=second):
        await client.resume_hook(f"sa-{run.run_id}", "tok")
        assert await run.result(timeout=20) == "acme"
    events = await engine.world.list_events(run.run_id)
    assert len(of_type(events, EventType.ATTRIBUTES_SET)) == 2
    info = await client.get_run(run.run_id)
    assert info.search_attributes["stage"] == "paid"
    assert info.search_attributes["tags"] == ["paid", "tok"]
    assert "note" not in info.search_attributes
    assert await _ids(engine, "stage=received") == set()
    assert await _ids(engine, "stage=paid", "tenant=acme", "amount>200") == {run.run_id}
    assert await _ids(engine, "tags=paid") == {run.run_id}


async def test_status_since_and_workflow_narrow_a_where(engine: Engine) -> None:
    client = engine.client
    ok = await client.start(sa_orders, "acme", 120.0)
    bad = await client.start(sa_orders, "acme", -5.0)
    other = await client.start_with(_opts(tenant="acme", amount=500), sa_plain, 1)
    async with engine.worker([sa_orders, sa_plain]):
        for run in (ok, bad):
            token = f"sa-{run.run_id}"

            async def hooked(token: str = token) -> bool:
                return await engine.world.get_hook(token) is not None

            await wait_for(hooked, timeout=20)
            await client.resume_hook(token, "t")
        await ok.result(timeout=20)
        with pytest.raises(wayline.RunFailedError):
            await bad.result(timeout=20)
        await other.result(timeout=20)
    assert await _ids(engine, "tenant=acme") == {ok.run_id, bad.run_id, other.run_id}
    assert await _ids(engine, "tenant=acme", status="failed") == {bad.run_id}
    assert await _ids(engine, "tenant=acme", workflow="sa_plain") == {other.run_id}
    assert await _ids(engine, "tenant=acme", "amount>100", workflow="sa_orders") == {ok.run_id}
    assert await _ids(engine, "tenant=acme", since="1h") == {ok.run_id, bad.run_id, other.run_id}
    later = datetime.now(UTC) + timedelta(hours=1)
    assert await _ids(engine, "tenant=acme", since=later) == set()
    limited = await client.list_runs(where="tenant=acme", limit=2)
    assert len(limited) == 2


@pytest.mark.parametrize(
    ("attributes", "message"),
    [
        ({"1st": "x"}, "name '1st' is not allowed"),
        ({"a.b": "x"}, "is not allowed"),
        ({"x" * 64: "x"}, "is not allowed"),
        ({"when": datetime(2026, 1, 1)}, "needs a timezone"),
        ({"blob": b"x"}, "bytes is not indexed"),
        ({"obj": {"a": 1}}, "dict is not indexed"),
        ({"mixed": ["a", 1]}, "list is not indexed"),
        ({"long": "x" * 257}, "at most 256 characters"),
        ({"many": ["x"] * 33}, "at most 32 strings"),
        ({"nan": float("nan")}, "is not a number"),
        ({"big": 2**60}, r"at most 2\*\*53"),
        ({f"k{i}": i for i in range(33)}, "at most 32 search attributes"),
    ],
)
async def test_bad_attributes_at_a_start_are_refused_and_write_nothing(
    engine: Engine, attributes: dict[str, Any], message: str
) -> None:
    with pytest.raises(wayline.InvalidAttributesError, match=message) as refused:
        await engine.client.start_with(wayline.StartOptions(attributes=attributes), sa_plain, 1)
    assert refused.value.code == "INVALID_ATTRIBUTES"
    assert await engine.client.list_runs() == []


async def test_a_bad_value_set_by_the_workflow_fails_the_run_with_its_code(engine: Engine) -> None:
    run = await engine.client.start(sa_bad_value)
    async with engine.worker([sa_bad_value]):
        with pytest.raises(wayline.RunFailedError) as failed:
            await run.result(timeout=20)
    assert failed.value.cause is not None and failed.value.cause.code == "INVALID_ATTRIBUTES"
    assert "needs a timezone" in str(failed.value)
    events = await engine.world.list_events(run.run_id)
    assert of_type(events, EventType.ATTRIBUTES_SET) == []


@pytest.mark.parametrize(
    ("where", "message"),
    [
        ("tenant", "is not 'key OP value'"),
        ("tenant==acme", "is not 'key OP value'"),
        ("tenant=", "has no value"),
        ("=acme", "is not 'key OP value'"),
        ("vip>true", "compares with = and != only"),
        ("due>2026-13-01", "not a date"),
        ("amount>1e999", "not a finite number"),
    ],
)
async def test_a_bad_where_is_refused_before_anything_is_read(
    engine: Engine, where: str, message: str
) -> None:
    with pytest.raises(wayline.InvalidQueryError, match=message) as refused:
        await engine.client.list_runs(where=where)
    assert refused.value.code == "INVALID_QUERY"


def test_a_workflow_with_bad_attributes_is_refused_where_it_is_declared() -> None:
    with pytest.raises(wayline.InvalidAttributesError, match="is not allowed"):

        @wayline.workflow(name=f"sa_bad_{uuid.uuid4().hex[:6]}", attributes={"-x": 1})
        async def bad() -> None:
            return None


async def test_an_append_the_world_refuses_changes_no_answer(engine: Engine) -> None:
    """SQLite writes the index rows in the append's transaction, JetStream checks every
    entry against the log: a refused ``attributes_set`` is found by neither."""
    client = engine.client
    run = await client.start_with(_opts(tenant="acme"), sa_plain, 1)
    await client.terminate(run.run_id)
    moved = NewEvent(EventType.ATTRIBUTES_SET, data={"set": {"tenant": "globex"}})
    with pytest.raises(wayline.RunTerminalError):
        await engine.world.append(run.run_id, [moved])
    assert await _ids(engine, "tenant=globex") == set()
    assert await _ids(engine, "tenant=acme") == {run.run_id}
    assert (await client.get_run(run.run_id)).search_attributes == {"tenant": "acme"}


def test_set_attributes_outside_a_workflow_is_a_named_error() -> None:
    with pytest.raises(wayline.NotInWorkflowError):
        wayline.set_attributes(tenant="acme")


@wayline.step
def sa_undo(n: int) -> None:
    return None


@wayline.step(compensate=sa_undo)
def sa_do(n: int) -> int:
    return n


@wayline.workflow
async def sa_saga(n: int) -> None:
    await sa_do(n)
    wayline.set_attributes(stage="failing")
    raise wayline.FatalError("after the attributes")


async def test_attributes_set_just_before_a_failure_that_unwinds_are_recorded(
    engine: Engine,
) -> None:
    run = await engine.client.start(sa_saga, 1)
    async with engine.worker([sa_saga]):
        with pytest.raises(wayline.RunFailedError):
            await run.result(timeout=20)
    info = await engine.client.get_run(run.run_id)
    assert info.search_attributes == {"stage": "failing"}
    assert await _ids(engine, "stage=failing") == {run.run_id}
