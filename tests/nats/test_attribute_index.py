"""The JetStream world's search attribute index against a real nats-server: it stays a
superset of the log. An entry whose append never landed (its writer died between the index
publish and the append) or whose value a later append changed is never an answer, and is
purged by a query that meets it once it is older than ``STALE_AFTER``; an append whose
renewal publish fails still stands and is found; a deleted run's entries go with it."""

from __future__ import annotations

from typing import Any

import pytest

import wayline
from tests.nats_fixtures import OpenWorlds
from wayline._core.events import EventType, NewEvent
from wayline._core.search_attributes import parse_where
from wayline.errors import WorldError
from wayline.worlds.nats import attribute_index


@wayline.workflow
async def sa_nats_plain(n: int) -> int:
    return n


async def _entries(world: Any, where: str) -> dict[str, Any]:
    return await world._listing.index().candidates(parse_where(where))


async def test_an_entry_whose_append_never_landed_is_no_answer_and_is_purged_when_old(
    open_nats_world: OpenWorlds, monkeypatch: pytest.MonkeyPatch
) -> None:
    world = await open_nats_world()
    client = wayline.Client(world)
    real = await client.start_with(
        wayline.StartOptions(attributes={"tenant": "globex"}), sa_nats_plain, 1
    )
    # A writer that published its entries and died before its append: one for a run that
    # holds another value, one for a run that was never created.
    ghost = "wf_" + "0" * 32
    await world._listing.index().write(real.run_id, {"tenant": "acme"})
    await world._listing.index().write(ghost, {"tenant": "acme"})
    assert set(await _entries(world, "tenant=acme")) == {real.run_id, ghost}
    assert await client.list_runs(where="tenant=acme") == []
    # young entries are kept: they may be those of an append still under way
    assert set(await _entries(world, "tenant=acme")) == {real.run_id, ghost}
    monkeypatch.setattr(attribute_index, "STALE_AFTER", -1.0)
    assert await client.list_runs(where="tenant=acme") == []
    assert await _entries(world, "tenant=acme") == {}
    assert [r.run_id for r in await client.list_runs(where="tenant=globex")] == [real.run_id]


async def test_a_changed_value_answers_by_the_log_and_its_old_entry_is_purged(
    open_nats_world: OpenWorlds, monkeypatch: pytest.MonkeyPatch
) -> None:
    world = await open_nats_world()
    client = wayline.Client(world)
    run = await client.start_with(
        wayline.StartOptions(attributes={"stage": "received"}), sa_nats_plain, 1
    )
    set_paid = NewEvent(EventType.ATTRIBUTES_SET, data={"set": {"stage": "paid"}})
    await world.append(run.run_id, [set_paid])
    monkeypatch.setattr(attribute_index, "STALE_AFTER", -1.0)
    assert await client.list_runs(where="stage=received") == []
    assert await _entries(world, "stage=received") == {}
    assert [r.run_id for r in await client.list_runs(where="stage=paid")] == [run.run_id]


async def test_an_append_whose_renewal_fails_stands_and_is_found(
    open_nats_world: OpenWorlds, monkeypatch: pytest.MonkeyPatch
) -> None:
    world = await open_nats_world()
    client = wayline.Client(world)
    index = world._listing.index()
    calls: list[str] = []
    write = index.write

    async def fails_the_second(run_id: str, values: Any) -> None:
        calls.append(run_id)
        if len(calls) == 2:
            raise WorldError("the connection went away after the append")
        await write(run_id, values)

    monkeypatch.setattr(index, "write", fails_the_second)
    run = await client.start_with(
        wayline.StartOptions(attributes={"tenant": "acme"}), sa_nats_plain, 1
    )
    assert len(calls) == 2
    assert [r.run_id for r in await client.list_runs(where="tenant=acme")] == [run.run_id]


async def test_an_index_that_cannot_be_written_refuses_the_append_and_writes_nothing(
    open_nats_world: OpenWorlds, monkeypatch: pytest.MonkeyPatch
) -> None:
    world = await open_nats_world()
    client = wayline.Client(world)
    index = world._listing.index()

    async def down(run_id: str, values: Any) -> None:
        raise WorldError("the index stream is not there")

    monkeypatch.setattr(index, "write", down)
    with pytest.raises(WorldError, match="index stream"):
        await client.start_with(
            wayline.StartOptions(attributes={"tenant": "acme"}), sa_nats_plain, 1
        )
    assert await client.list_runs() == []


async def test_a_deleted_run_takes_its_entries_with_it(open_nats_world: OpenWorlds) -> None:
    world = await open_nats_world()
    client = wayline.Client(world)
    run = await client.start_with(
        wayline.StartOptions(attributes={"tenant": "acme", "tags": ["a", "b"]}), sa_nats_plain, 1
    )
    await client.terminate(run.run_id)
    assert set(await _entries(world, "tags=a")) == {run.run_id}
    assert await world.delete_runs(older_than=0) == 1
    assert await _entries(world, "tenant=acme") == {}
    assert await _entries(world, "tags=b") == {}
