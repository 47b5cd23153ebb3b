"""The operator's status mirror (``wayline_operator.mirror``) on a real SQLite world: what a
sync posts as Events when the status write that follows them fails. The pump retries a failed
sync; the retry posts a log entry's notice under the same key (its Event's name, so the API
server creates it once) and does not say ``WaitingForWorker`` again (it has no such name). The
API server is the part replaced here: ``post`` and ``patch`` are recorders."""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

import wayline
from tests.runtime import flows
from tests.runtime.harness import settings, wait_for
from wayline.worlds.local import LocalWorld
from wayline_operator.mirror import Cadence, Mirror
from wayline_operator.notices import Budget, Notice
from wayline_operator.reconcile import Reconciler, run_id_for


class ApiServer:
    """Records the Events posted and the statuses written; a write fails while ``down``."""

    def __init__(self) -> None:
        self.posted: list[str] = []
        self.keys: list[str] = []
        self.written: list[dict[str, Any]] = []
        self.down = 0

    def post(self, body: Mapping[str, Any], batch: Sequence[Notice]) -> None:
        self.posted += [n.reason for n in batch]
        self.keys += [n.key for n in batch]

    async def patch(self, namespace: str, name: str, status: Mapping[str, Any]) -> bool:
        if self.down:
            self.down -= 1
            raise RuntimeError("etcdserver: request timed out")
        self.written.append(dict(status))
        return True

    async def remove(self, ref: Mapping[str, Any]) -> None:
        raise AssertionError("nothing here has a TTL")


def _mirror(world: LocalWorld, api: ApiServer) -> Mirror:
    return Mirror(Reconciler(world), Budget(), api.post, api.patch, api.remove, Cadence(settle=0.0))


def _resource(uid: str, name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "wayline.dev/v1alpha1",
        "kind": "WorkflowRun",
        "metadata": {"name": name, "namespace": "ns", "uid": uid, "generation": 1},
        "spec": spec,
    }


async def test_a_failed_status_write_posts_its_events_again_under_their_names(
    world: LocalWorld,
) -> None:
    """The sync after a failed status write posts the notices of the same log entries again,
    each under the key its Event is named after (``kube.event_name``): the API server creates
    nothing twice, and an Event lost with the failed write is created by the retry."""
    api, uid = ApiServer(), str(uuid.uuid4())
    mirror = _mirror(world, api)
    spec = {"workflow": "kid_waits", "input": "tok-m"}
    mirror.seen("ADDED", _resource(uid, "wait", spec))
    run_id = await mirror.reconciler.start(uid, spec)
    assert run_id == run_id_for(uid)
    async with wayline.Worker(world, [flows.kid_waits], settings=settings()):
        await wait_for(lambda: world.get_hook("tok-m"))
        api.down = 1
        with pytest.raises(RuntimeError, match="timed out"):
            await mirror.sync(run_id)  # posted, then the write failed: the pump tries again
        assert api.posted == ["RunStarted", "WaitingForHook"] and api.written == []
        assert await mirror.sync(run_id)
        assert api.written[-1]["phase"] == "running"
        assert api.posted == ["RunStarted", "WaitingForHook"] * 2
        assert await mirror.sync(run_id) is False  # written: nothing new to say
        await mirror.reconciler.client.resume_hook("tok-m", 1)
        await wayline.Client(world).handle(run_id).result(timeout=10)
    assert await mirror.sync(run_id)
    assert api.written[-1]["phase"] == "completed"
    events = await world.list_events(run_id)
    seq = {e.type.value: str(e.seq) for e in events}
    said = list(dict.fromkeys(zip(api.posted, api.keys, strict=True)))
    assert said == [
        ("RunStarted", seq["run_started"]),
        ("WaitingForHook", seq["hook_created"]),
        ("RunSucceeded", seq["run_completed"]),
    ]


async def test_a_failed_status_write_does_not_say_waiting_for_worker_twice(
    world: LocalWorld,
) -> None:
    api, uid = ApiServer(), str(uuid.uuid4())
    mirror = _mirror(world, api)
    spec = {"workflow": "chian", "input": [1]}
    mirror.seen("ADDED", _resource(uid, "typo", spec))
    run_id = await mirror.reconciler.start(uid, spec)
    await mirror.follow(feed=False)  # reads the (empty) worker registry
    api.down = 1
    with pytest.raises(RuntimeError):
        await mirror.sync(run_id)
    assert "WaitingForWorker" in api.posted
    assert await mirror.sync(run_id)
    assert api.written[-1]["waitingForSummary"].startswith("worker")
    assert api.posted.count("WaitingForWorker") == 1
    await mirror.close()


async def test_the_wakes_it_announced_are_kept_only_while_their_run_lives(
    world: LocalWorld, tmp_path: Path
) -> None:
    """The decision table's sweep arms a wake for a step whose body runs under a live lease,
    and its Event is posted once per wake, not once per sweep. The keys that remember that are
    kept per run and dropped when the run ends (or its resource goes): an operator that ran
    for months kept every wake it ever armed."""
    api, uid = ApiServer(), str(uuid.uuid4())
    mirror = _mirror(world, api)
    marker = str(tmp_path / "marker")
    spec = {"workflow": "single_slow", "input": [marker, 1.5]}
    mirror.seen("ADDED", _resource(uid, "slow", spec))
    run_id = await mirror.reconciler.start(uid, spec)
    async with wayline.Worker(world, [flows.single_slow], settings=settings()):

        async def body_started() -> bool:
            return bool(flows.lines(marker))

        await wait_for(body_started)
        await mirror.sync(run_id)
        mirror.table_due.clear()  # the next sweep is due at once
        await mirror.sync(run_id)
        assert api.posted.count("BackstopArmed") == 1, api.posted
        assert mirror.posted_wakes
        await wayline.Client(world).handle(run_id).result(timeout=10)
    assert await mirror.sync(run_id)
    assert api.written[-1]["phase"] == "completed"
    assert not mirror.posted_wakes


async def test_a_resume_asked_of_an_abandoned_park_does_not_stop_the_status(
    world: LocalWorld, tmp_path: Path
) -> None:
    """A person abandoned a stuck unwind (``wayline runs abandon-compensation``, or another
    replica); until a worker ends the run it stays parked. A spec asking for a resume then
    (``compensation.resumes: 1``, a re-applied manifest) cannot be carried out (7a7af5d refuses
    it): the sync must not fail on it, so the status is still written."""
    api, uid = ApiServer(), str(uuid.uuid4())
    mirror = _mirror(world, api)
    log = str(tmp_path / "log")
    (tmp_path / flows.STUCK_FLAG).touch()
    spec = {"workflow": "saga_stuck", "input": [log, "o1"]}
    mirror.seen("ADDED", _resource(uid, "stuck", spec))
    run_id = await mirror.reconciler.start(uid, spec)
    client = wayline.Client(world)
    async with wayline.Worker(world, [flows.saga_stuck], settings=settings()):

        async def stuck() -> bool:
            return await client.handle(run_id).status() is wayline.RunStatus.COMPENSATION_STUCK

        await wait_for(stuck, timeout=20)
    await client.abandon_compensation(run_id)  # no worker: it stays parked for now
    mirror.seen("MODIFIED", _resource(uid, "stuck", spec | {"compensation": {"resumes": 1}}))
    assert await mirror.sync(run_id)
    assert api.written[-1]["phase"] == "compensation_stuck"
