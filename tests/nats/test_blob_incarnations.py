"""On NATS a run's out-of-line payloads are objects named by its run id and its incarnation
(the Nats-Msg-Id of its first message), so an archived run and the run its id names again
never share one. Objects written before incarnations were named (``<run>/<sha256>``, the
references naming none) still read after the upgrade, and a cleanup deletes one only when the
archive's copies of the id do not name it. Real nats-server."""

from __future__ import annotations

import hashlib
import json
import time
import uuid
from typing import Any

import pytest

import wayline
from tests.blobs import flows
from tests.blobs.stores import archived_events, archived_input, blobs_of, stored
from tests.nats_fixtures import OpenWorlds
from tests.runtime.harness import settings
from wayline._core.events import EventType, NewEvent
from wayline._core.ids import new_run_id
from wayline.errors import BlobMissingError
from wayline.world.blobs import INCARNATION, REF, dumps
from wayline.worlds.nats.retention import Retention

INPUT = 300 * 1024


async def _old_blob(world: Any, run_id: str, value: Any) -> dict[str, Any]:
    """Store ``value`` as the version before incarnations did (``<run>/<sha256>``) and return
    the reference that version wrote for it."""
    data = dumps(value)
    digest = hashlib.sha256(data).hexdigest()
    await blobs_of(world).store.put(run_id, digest, data)
    return {REF: digest, "bytes": len(data)}


async def _old_run(world: Any, run_id: str, value: Any, output: Any) -> None:
    """A completed run as the version before incarnations wrote it, out-of-line input and
    output included. Appended to the log as it is, past the world's stowing, which would store
    a value shaped like a reference out of line."""
    log = world._events()
    created = {"workflow": "old", "input": await _old_blob(world, run_id, value)}
    await log.append(
        run_id, [NewEvent(EventType.RUN_CREATED, data=created), NewEvent(EventType.RUN_STARTED)], 0
    )
    done = {"output": await _old_blob(world, run_id, output)}
    await log.append(run_id, [NewEvent(EventType.RUN_COMPLETED, data=done)], None)


async def test_a_run_written_before_incarnations_reads_and_its_cleanup_deletes_its_blobs(
    open_nats_world: OpenWorlds,
) -> None:
    world = await open_nats_world()
    run_id, value, output = new_run_id(), "i" * INPUT, "o" * INPUT
    await _old_run(world, run_id, value, output)
    fresh = await open_nats_world()  # the upgraded version, nothing cached
    info = await fresh.get_run(run_id)
    assert info is not None and info.input == value and info.output == output
    assert (await fresh.list_events(run_id))[0].data["input"] == value
    assert await fresh.delete_runs(older_than=0) == 1
    assert not await stored(fresh, run_id, value) and not await stored(fresh, run_id, output)


async def test_a_cleanup_keeps_an_old_blob_the_archive_names_and_deletes_the_others(
    open_nats_world: OpenWorlds,
) -> None:
    """Before incarnations, an id started again after its archive with the same input named
    the archived run's object (a put finds its name stored and is skipped): a cleanup after
    the upgrade must leave it, and still delete the new run's own output."""
    world = await open_nats_world()
    run_id, value = new_run_id(), "s" * INPUT
    await _old_run(world, run_id, value, "first output " * 30000)
    assert await world.archive_runs(older_than=0) == 1
    await _old_run(world, run_id, value, "second output " * 30000)
    fresh = await open_nats_world()
    assert await fresh.delete_runs(older_than=0) == 1
    assert await archived_input(await open_nats_world(), run_id) == value
    assert not await stored(fresh, run_id, "second output " * 30000)


async def _two_incarnations(world: Any, value: str) -> tuple[str, Any, Any, float]:
    """An id whose run (input ``value``) was archived and started again with the same input
    (pending: no worker), with the references of the archived and the live input and a time
    between the two runs."""
    run_id, client = new_run_id(), wayline.Client(world)
    async with wayline.Worker(world, [flows.echo], settings=settings()):
        handle = await client.start_with(wayline.StartOptions(run_id=run_id), flows.echo, value)
        assert await handle.result(60) == value
    assert await world.archive_runs(older_than=0) == 1
    between = time.time()
    await client.start_with(wayline.StartOptions(run_id=run_id), flows.echo, value)
    archived = (await archived_events(world, run_id))[0].data["input"]
    live = (await world._events().list_events(run_id, 0))[0].data["input"]
    assert archived[REF] == live[REF] and archived[INCARNATION] != live[INCARNATION]
    return run_id, archived, live, between


async def _drop(world: Any, run_id: str, incarnation: str, ended: float) -> None:
    """What a cleanup of that incarnation, ended at ``ended``, does to the bucket."""
    store = blobs_of(world).store
    retention = world._cleanup.retention()
    await store.drop(
        run_id, incarnation, ended, await store.names(), lambda: retention.archived(run_id)
    )


async def _blob(world: Any, run_id: str, ref: dict[str, Any]) -> bytes | None:
    return await blobs_of(world).store.get(run_id, ref[REF], incarnation=ref[INCARNATION])


@pytest.mark.parametrize("dropped", ["archived", "live"])
async def test_the_drop_of_one_incarnation_leaves_the_others_objects(
    open_nats_world: OpenWorlds, dropped: str
) -> None:
    """One of two incarnations of one id (the archived run, the live run of the same input)
    dropped as a cleanup drops it: the other's input still reads."""
    world = await open_nats_world()
    value = "r" * INPUT
    run_id, archived, live, between = await _two_incarnations(world, value)
    gone, ended = (archived, between) if dropped == "archived" else (live, time.time())
    await _drop(world, run_id, gone[INCARNATION], ended)
    assert await _blob(world, run_id, gone) is None
    fresh = await open_nats_world()
    if dropped == "archived":
        info = await fresh.get_run(run_id)
        assert info is not None and info.input == {"args": [value]}
    else:
        assert await archived_input(fresh, run_id) == {"args": [value]}


@pytest.mark.parametrize("incarnation", ["a/b", ">", "", 7])
async def test_a_reference_naming_an_odd_incarnation_fences_the_run(
    open_nats_world: OpenWorlds, incarnation: Any
) -> None:
    """Anyone who can write the log can write a reference: one whose incarnation no writer
    makes (a name segment that is not one, a wildcard, not a string) is refused as malformed,
    never turned into another object's name."""
    world = await open_nats_world()
    run_id = new_run_id()
    ref = {**await _old_blob(world, run_id, "x" * INPUT), INCARNATION: incarnation}
    created = {"workflow": "odd", "input": ref}
    await world._events().append(run_id, [NewEvent(EventType.RUN_CREATED, data=created)], 0)
    with pytest.raises(BlobMissingError, match="malformed reference"):
        await (await open_nats_world()).get_run(run_id)


async def test_a_repeated_start_of_a_taken_id_stores_no_blob(open_nats_world: OpenWorlds) -> None:
    """A start with an id (idempotent) repeated with another large input is refused before
    its input is stored: an object under a new incarnation would belong to no run, and no
    cleanup would ever delete it."""
    world = await open_nats_world()
    run_id, first, second = new_run_id(), "f" * INPUT, "g" * INPUT
    client = wayline.Client(world)
    # no worker: it stays pending
    await client.start_with(wayline.StartOptions(run_id=run_id), flows.echo, first)
    again = await wayline.Client(await open_nats_world()).start_with(
        wayline.StartOptions(run_id=run_id), flows.echo, second
    )
    assert again.run_id == run_id
    assert not await stored(world, run_id, {"args": [second]})
    assert await stored(world, run_id, {"args": [first]})


@pytest.mark.parametrize("how", ["archived", "deleted"])
async def test_a_cleanup_that_listed_the_old_run_leaves_the_id_started_again(
    open_nats_world: OpenWorlds, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    """A cleanup lists the ended runs, then deletes them one by one. Between the two, another
    process archives (or deletes) one and its id is started again: the cleanup dropped the
    new, live run (its input, its log, its start) for the ended one it had listed."""
    world, other = await open_nats_world(), await open_nats_world()
    value, run_id = "l" * INPUT, new_run_id()
    async with wayline.Worker(world, [flows.echo], settings=settings()):
        old = await wayline.Client(world).start_with(
            wayline.StartOptions(run_id=run_id), flows.echo, value
        )
        assert await old.result(timeout=60) == value
    listed = Retention._candidates
    meanwhile: list[str] = []

    async def listing(self: Retention, *args: Any, **kwargs: Any) -> list[str]:
        ids = await listed(self, *args, **kwargs)
        if not meanwhile:
            meanwhile.append(run_id)
            if how == "archived":
                assert await other.archive_runs(older_than=0) == 1
            else:
                assert await other.delete_runs(older_than=0) == 1
            # pending
            await wayline.Client(other).start_with(
                wayline.StartOptions(run_id=run_id), flows.echo, value
            )
        return ids

    monkeypatch.setattr(Retention, "_candidates", listing)
    deleted = await world.delete_runs(older_than=0)
    fresh = await open_nats_world()
    info = await fresh.get_run(run_id)
    assert info is not None and info.input == {"args": [value]}
    assert deleted == 0
    if how == "archived":
        assert await archived_input(fresh, run_id) == {"args": [value]}
    async with wayline.Worker(fresh, [flows.echo], settings=settings()):  # its start is there
        assert await wayline.Client(fresh).handle(run_id).result(timeout=60) == value


async def test_an_archived_copy_that_does_not_read_keeps_the_old_blobs(
    open_nats_world: OpenWorlds,
) -> None:
    """Bytes on the id's archive subject that are no copy Wayline wrote may stand for one
    naming any old blob: the cleanup keeps the id's objects named without an incarnation."""
    world = await open_nats_world()
    run_id, value = new_run_id(), "j" * INPUT
    await _old_run(world, run_id, value, "out " * 80000)
    await world._log._js.publish(world.names.archive_subject(run_id), b"not a copy")
    assert await world.delete_runs(older_than=0) == 1
    assert await stored(world, run_id, value) and await stored(world, run_id, "out " * 80000)


async def test_the_previous_version_reads_a_payload_this_one_stores(
    open_nats_world: OpenWorlds,
) -> None:
    """A worker of the version before incarnations (still running during a rolling update,
    or rolled back to) looks a reference up as ``<run>/<sha256>`` and ignores its incarnation:
    the object is stored under that name too, and the run's cleanup deletes both."""
    world = await open_nats_world()
    run_id, value = new_run_id(), "p" * INPUT
    # pending: no worker
    await wayline.Client(world).start_with(wayline.StartOptions(run_id=run_id), flows.echo, value)
    ref = (await world._events().list_events(run_id, 0))[0].data["input"]
    assert ref[INCARNATION]
    store = blobs_of(await open_nats_world()).store
    legacy = await store.get(run_id, ref[REF])  # the look-up the previous version makes
    assert legacy is not None and json.loads(legacy) == {"args": [value]}
    await wayline.Client(world).fail(run_id, "test")
    assert await world.delete_runs(older_than=0) == 1
    assert await store.get(run_id, ref[REF]) is None
    assert await store.get(run_id, ref[REF], incarnation=ref[INCARNATION]) is None


async def test_a_cleanup_keeps_the_name_the_previous_version_reads_an_archived_run_by(
    open_nats_world: OpenWorlds,
) -> None:
    """The archived run and the live run of one id share the object named without an
    incarnation (the same input): the live run's cleanup leaves it, since the previous
    version reads the archived run's input by that name."""
    world = await open_nats_world()
    value = "k" * INPUT
    run_id, archived, live, _ = await _two_incarnations(world, value)
    await wayline.Client(world).fail(run_id, "test")
    assert await world.delete_runs(older_than=0) == 1
    store = blobs_of(await open_nats_world()).store
    assert await store.get(run_id, live[REF], incarnation=live[INCARNATION]) is None
    legacy = await store.get(run_id, archived[REF])
    assert legacy is not None and json.loads(legacy) == {"args": [value]}


async def _stray_blob(world: Any, run_id: str, value: Any) -> None:
    """Store ``value`` under an incarnation no run of the id has: what a ``run_created``
    leaves that stored its input and then did not land (it lost the race for the id, or its
    publish failed and the start was retried under another message id)."""
    data = dumps(value)
    digest = hashlib.sha256(data).hexdigest()
    await blobs_of(world).store.put(run_id, digest, data, incarnation=uuid.uuid4().hex)


async def test_a_cleanup_deletes_the_blob_of_a_start_that_never_landed(
    open_nats_world: OpenWorlds,
) -> None:
    world = await open_nats_world()
    run_id, lost, won = new_run_id(), {"args": ["x" * INPUT]}, "y" * INPUT
    await _stray_blob(world, run_id, lost)
    # pending: no worker
    await wayline.Client(world).start_with(wayline.StartOptions(run_id=run_id), flows.echo, won)
    await wayline.Client(world).fail(run_id, "test")
    assert await world.delete_runs(older_than=0) == 1
    fresh = await open_nats_world()
    assert not await stored(fresh, run_id, lost)
    assert not await stored(fresh, run_id, {"args": [won]})


async def test_a_cleanup_keeps_another_incarnations_blob_stored_after_the_run_ended(
    open_nats_world: OpenWorlds,
) -> None:
    """An object of another incarnation stored once the run had ended may be a start of the
    same id under way, whose ``run_created`` lands once the ended run is purged: it stays."""
    world = await open_nats_world()
    run_id, later = new_run_id(), {"args": ["z" * INPUT]}
    await wayline.Client(world).start_with(
        wayline.StartOptions(run_id=run_id), flows.echo, "w" * INPUT
    )
    await wayline.Client(world).fail(run_id, "test")
    await _stray_blob(world, run_id, later)
    assert await world.delete_runs(older_than=0) == 1
    assert await stored(await open_nats_world(), run_id, later)
