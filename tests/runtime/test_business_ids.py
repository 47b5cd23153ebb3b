"""Business ids on every world: ``Client.start_with(StartOptions(id="order-123"), wf, ...)``
starts a run named by the caller's key, the conflict and reuse policies (named as Temporal
names them) decide what a second start under the id does, and every call that takes a run id
takes the business id."""

from __future__ import annotations

import asyncio
import uuid

import pytest

import wayline
from tests.runtime.harness import Engine, of_type, wait_for
from wayline._core.events import EventType
from wayline.world.business_ids import generation_run_id

pytestmark = pytest.mark.partitioned  # docs/nats.md, "Partitions"


@wayline.workflow
async def bid_echo(value: str) -> str:
    if value == "fail":
        raise wayline.FatalError("asked to fail")
    return value


@wayline.workflow
async def bid_sleeper() -> str:
    await wayline.sleep("1h")
    return "woke"


def _id() -> str:
    return f"order-{uuid.uuid4().hex[:8]}"


async def _created(engine: Engine, run_id: str) -> int:
    return len(of_type(await engine.world.list_events(run_id), EventType.RUN_CREATED))


async def test_a_start_by_id_twice_is_one_run_that_records_the_id(engine: Engine) -> None:
    client, bid = engine.client, _id()
    first = await client.start_with(wayline.StartOptions(id=bid), bid_echo, "a")
    # use_existing: the first run's handle
    again = await client.start_with(wayline.StartOptions(id=bid), bid_echo, "b")
    assert again.run_id == first.run_id and first.id == again.id == bid
    assert first.run_id == generation_run_id(bid, None, 0)
    assert await _created(engine, first.run_id) == 1
    info = await client.get_run(bid)
    assert (info.run_id, info.business_id) == (first.run_id, bid)
    assert [r.run_id for r in await client.list_runs()] == [first.run_id]
    async with engine.worker([bid_echo]):
        assert await client.handle(bid).result(timeout=20) == "a"
    plain = await client.start(bid_echo, "x")
    assert (await client.get_run(plain.run_id)).business_id is None


async def test_the_fail_policy_names_the_existing_run_and_its_status(engine: Engine) -> None:
    client, bid = engine.client, _id()
    first = await client.start_with(wayline.StartOptions(id=bid), bid_echo, "a")
    with pytest.raises(wayline.RunAlreadyExistsError) as live:
        await client.start_with(wayline.StartOptions(id=bid, id_conflict="fail"), bid_echo, "a")
    assert live.value.code == "RUN_ALREADY_EXISTS"
    assert (live.value.run_id, live.value.status, live.value.business_id) == (
        first.run_id,
        "pending",
        bid,
    )
    assert first.run_id in str(live.value) and "pending" in str(live.value)
    async with engine.worker([bid_echo]):
        assert await first.result(timeout=20) == "a"
    with pytest.raises(wayline.RunAlreadyExistsError, match="completed") as ended:
        await client.start_with(wayline.StartOptions(id=bid, id_conflict="fail"), bid_echo, "a")
    assert ended.value.status == "completed"
    # a run_id= start takes the fail policy too
    with pytest.raises(wayline.RunAlreadyExistsError, match="completed"):
        await client.start_with(
            wayline.StartOptions(run_id=first.run_id, id_conflict="fail"), bid_echo, "a"
        )
    assert len(await client.list_runs()) == 1


async def test_allow_duplicate_starts_a_new_run_once_the_old_one_ended(engine: Engine) -> None:
    client, bid = engine.client, _id()
    async with engine.worker([bid_echo]):
        old = await client.start_with(wayline.StartOptions(id=bid), bid_echo, "first")
        assert await old.result(timeout=20) == "first"
        new = await client.start_with(
            wayline.StartOptions(id=bid, id_reuse="allow_duplicate"), bid_echo, "second"
        )
        assert new.run_id != old.run_id and new.id == bid
        assert await new.result(timeout=20) == "second"
        # the id names the newest run; the old one is still read by its run id
        assert (await client.get_run(bid)).run_id == new.run_id
        assert await client.handle(bid).result(timeout=20) == "second"
        kept = await client.get_run(old.run_id)
        assert (kept.status, kept.output, kept.business_id) == ("completed", "first", bid)
        # the default (reject_duplicate) returns the newest run, ended, and starts none
        same = await client.start_with(wayline.StartOptions(id=bid), bid_echo, "third")
        assert same.run_id == new.run_id and await same.result(timeout=20) == "second"
    assert len(await client.list_runs()) == 2


async def test_allow_duplicate_failed_only_starts_anew_only_after_a_failure(
    engine: Engine,
) -> None:
    client, bid = engine.client, _id()
    policy = "allow_duplicate_failed_only"
    async with engine.worker([bid_echo]):
        failed = await client.start_with(wayline.StartOptions(id=bid), bid_echo, "fail")
        with pytest.raises(wayline.RunFailedError):
            await failed.result(timeout=20)
        retried = await client.start_with(
            wayline.StartOptions(id=bid, id_reuse=policy), bid_echo, "ok"
        )
        assert retried.run_id != failed.run_id
        assert await retried.result(timeout=20) == "ok"
        # after a completed run it starts none: the completed run is the existing one
        again = await client.start_with(
            wayline.StartOptions(id=bid, id_reuse=policy), bid_echo, "other"
        )
        assert again.run_id == retried.run_id
        with pytest.raises(wayline.RunAlreadyExistsError, match="completed"):
            await client.start_with(
                wayline.StartOptions(id=bid, id_reuse=policy, id_conflict="fail"), bid_echo, "other"
            )
    assert len(await client.list_runs()) == 2


async def test_reject_duplicate_returns_the_ended_run_whatever_its_outcome(
    engine: Engine,
) -> None:
    client, bid = engine.client, _id()
    async with engine.worker([bid_echo]):
        failed = await client.start_with(wayline.StartOptions(id=bid), bid_echo, "fail")
        with pytest.raises(wayline.RunFailedError):
            await failed.result(timeout=20)
        again = await client.start_with(
            wayline.StartOptions(id=bid, id_reuse="reject_duplicate"), bid_echo, "ok"
        )
        assert again.run_id == failed.run_id
        with pytest.raises(wayline.RunFailedError):
            await again.result(timeout=20)
    assert len(await client.list_runs()) == 1


async def test_a_reuse_policy_starts_nothing_while_the_run_is_live(engine: Engine) -> None:
    client, bid = engine.client, _id()
    live = await client.start_with(wayline.StartOptions(id=bid), bid_echo, "a")
    for policy in ("allow_duplicate", "allow_duplicate_failed_only"):
        assert (
            await client.start_with(wayline.StartOptions(id=bid, id_reuse=policy), bid_echo, "a")
        ).run_id == live.run_id
    assert await _created(engine, live.run_id) == 1
    assert len(await client.list_runs()) == 1


async def test_racing_starts_after_an_ended_run_start_exactly_one_new_run(
    engine: Engine,
) -> None:
    """Eight starters on their own connections find the run of the id ended and all ask for
    generation 1: one append wins, and the others return the winner's run (use_existing)."""
    bid = _id()
    old = await engine.client.start_with(wayline.StartOptions(id=bid), bid_echo, "a")
    assert await engine.client.terminate(bid)
    clients = [wayline.Client(await engine.make_world()) for _ in range(8)]
    handles = await asyncio.gather(
        *(
            c.start_with(wayline.StartOptions(id=bid, id_reuse="allow_duplicate"), bid_echo, "b")
            for c in clients
        )
    )
    assert {h.run_id for h in handles} == {generation_run_id(bid, None, 1)}
    assert {r.run_id for r in await engine.client.list_runs()} == {old.run_id, handles[0].run_id}
    assert await _created(engine, handles[0].run_id) == 1
    assert await engine.world.get_run(generation_run_id(bid, None, 2)) is None


@pytest.mark.parametrize(
    ("bad", "said"),
    [
        ("", "1 to 256 characters"),
        ("x" * 257, "1 to 256 characters"),
        ("order\n123", "no control characters"),
        ("order\x00123", "no control characters"),
        (" order-123", "neither starts nor ends with a space"),
        ("wf_" + "0" * 32, "is a run id"),
    ],
    ids=["empty", "too-long", "newline", "nul", "space", "a-run-id"],
)
async def test_a_bad_id_is_refused_before_anything_is_written(
    engine: Engine, bad: str, said: str
) -> None:
    with pytest.raises(wayline.InvalidIdError, match=said):
        await engine.client.start_with(wayline.StartOptions(id=bad), bid_echo, "a")
    assert await engine.client.list_runs() == []


async def test_bad_id_options_are_refused_before_anything_is_written(engine: Engine) -> None:
    client = engine.client
    refusals = [
        ({"id": "order-1", "run_id": "wf_" + "1" * 32}, "not both"),
        ({"run_id": "order-1"}, "a business id such as 'order-123' is given as id="),
        ({"id": "order-1", "id_conflict": "replace"}, "id_conflict is one of"),
        ({"id": "order-1", "id_reuse": "always"}, "id_reuse is one of"),
        ({"id_reuse": "allow_duplicate"}, "needs id="),
    ]
    for options, said in refusals:
        with pytest.raises(wayline.InvalidIdError, match=said):
            # refused as the options are made, before any start could write
            wayline.StartOptions(**options)  # type: ignore[arg-type]
    with pytest.raises(wayline.InvalidIdError, match="1 to 256"):
        await client.get_run("")
    with pytest.raises(wayline.RunNotFoundError, match="no run 'order-none'"):
        await client.get_run("order-none")
    assert await client.list_runs() == []


async def test_namespaces_keep_the_same_id_apart(engine: Engine) -> None:
    bid = _id()
    none, team_a, team_b = (
        engine.client,
        wayline.Client(engine.world, namespace="team-a"),
        wayline.Client(engine.world, namespace="team-b"),
    )
    runs = [
        await c.start_with(wayline.StartOptions(id=bid), bid_echo, "a")
        for c in (none, team_a, team_b)
    ]
    assert len({h.run_id for h in runs}) == 3
    for client, handle in zip((none, team_a, team_b), runs, strict=True):
        info = await client.get_run(bid)
        assert info.run_id == handle.run_id and info.business_id == bid
        assert info.attributes.get("namespace") == client.namespace
    assert await team_a.resolve(bid) == generation_run_id(bid, "team-a", 0)
    with pytest.raises(wayline.RunNotFoundError):
        await wayline.Client(engine.world, namespace="team-c").get_run(bid)


async def test_every_run_call_takes_the_business_id(engine: Engine) -> None:
    client, woken, cancelled, ended = engine.client, _id(), _id(), _id()
    async with engine.worker([bid_sleeper]):
        first = await client.start_with(wayline.StartOptions(id=woken), bid_sleeper)

        async def sleeping() -> bool:
            view = await client.handle(woken).events()
            return bool(of_type(view, EventType.WAIT_CREATED))

        await wait_for(sleeping, timeout=20)
        assert await client.wake_up(woken) == ["w1"]
        assert await client.handle(woken).result(timeout=20) == "woke"
        assert await client.handle(woken).status() == "completed"
        pinned = client.handle(woken)
        assert pinned.run_id == woken  # resolved on its first call, and kept
        await pinned.status()
        assert (pinned.run_id, pinned.id) == (first.run_id, woken)

        second = await client.start_with(wayline.StartOptions(id=cancelled), bid_sleeper)
        assert await client.handle(cancelled).cancel()
        with pytest.raises(wayline.RunCancelledError):
            await second.result(timeout=20)

        await client.start_with(wayline.StartOptions(id=ended), bid_sleeper)
        assert await client.terminate(ended)
        assert (await client.get_run(ended)).status == "cancelled"
        assert not await client.fail(ended)
