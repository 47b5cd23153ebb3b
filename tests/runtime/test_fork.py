"""Fork on both worlds: a new run whose log is the old one's up to a step's first attempt.
What came before the step is reused (its bodies do not run again), the step and every later
one run with the code the workers run now, under the keys they had in the old run; a bad
step or occurrence is refused naming what exists, and creates nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

import wayline
from tests.runtime import fork_flows
from tests.runtime.flows import lines
from tests.runtime.harness import Engine, of_type, wait_for
from wayline._core.events import EventType, RunStatus

pytestmark = pytest.mark.engine_logic  # docs/testing.md, "The pyramid"


async def _failed_order(engine: Engine, path: str) -> wayline.RunHandle[list[str]]:
    """An order whose charge failed (the card was declined): the run failed."""
    handle = await fork_flows.failed_run(engine.client, fork_flows.order, path)
    Path(path + ".broken").unlink()  # noqa: ASYNC240 - the fix: the fork's charge succeeds
    return handle


async def test_a_fork_reuses_the_steps_before_its_point_and_runs_the_rest_again(
    engine: Engine, tmp_path: Path
) -> None:
    path = str(tmp_path / "m")
    async with engine.worker([fork_flows.order]):
        old = await _failed_order(engine, path)
        fork = await engine.client.fork(old.run_id, from_step="fork_flows.charge")
        assert fork.run_id != old.run_id
        assert await fork.result(timeout=20) == [
            "reserved book",
            "reserved pen",
            "charged 12",
            "shipped",
        ]
    ran = [line.split()[0] for line in lines(path)]
    # the reservations ran once, in the old run; the charge once there and once in the fork
    assert ran == ["reserve", "reserve", "charge", "charge", "ship"]
    info = await engine.client.get_run(fork.run_id)
    assert info.input == (await engine.client.get_run(old.run_id)).input
    assert info.attributes["forkedFrom"] == {
        "runId": old.run_id,
        "step": "fork_flows.charge",
        "occurrence": 1,
        "stepId": "s3",
    }
    assert (await engine.client.get_run(old.run_id)).status is RunStatus.FAILED
    assert [r.run_id for r in await engine.client.forks_of(old.run_id)] == [fork.run_id]
    # the fork's log starts with the old one's, up to the charge's creation
    old_events, new_events = await old.events(), await fork.events()
    [charge_created] = [
        e for e in old_events if e.type is EventType.STEP_CREATED and e.correlation_id == "s3"
    ]
    kept = [(e.type, e.correlation_id) for e in old_events if e.seq < charge_created.seq]
    assert [(e.type, e.correlation_id) for e in new_events[: len(kept)]] == kept


async def test_a_re_run_step_keeps_the_idempotency_key_it_had_in_the_old_run(
    engine: Engine, tmp_path: Path
) -> None:
    path = str(tmp_path / "m")
    async with engine.worker([fork_flows.order]):
        old = await _failed_order(engine, path)
        first = await engine.client.fork(old.run_id, from_step="fork_flows.charge")
        await first.result(timeout=20)
        # a fork of the fork still charges under the key of the run the chain began with
        second = await first.fork("fork_flows.charge")
        await second.result(timeout=20)
    keys = [line.split()[-1] for line in lines(path) if line.startswith("charge")]
    assert keys == [f"{old.run_id}:fork_flows.charge#0:forward"] * 3
    [ship_key, again] = [line.split()[-1] for line in lines(path) if line.startswith("ship")]
    assert ship_key == again == f"{old.run_id}:fork_flows.ship#0:forward"


async def test_an_occurrence_picks_the_nth_call_of_a_step(engine: Engine, tmp_path: Path) -> None:
    path = str(tmp_path / "m")
    async with engine.worker([fork_flows.order]):
        old = await engine.client.start(fork_flows.order, path)
        await old.result(timeout=20)
        fork = await engine.client.fork(
            old.run_id, from_step="fork_flows.reserve#2", id="order-7-again"
        )
        assert fork.id == "order-7-again"
        await fork.result(timeout=20)
        info = await engine.client.get_run(fork.run_id)
        assert info.business_id == "order-7-again"
        assert info.attributes["forkedFrom"]["occurrence"] == 2
    ran = [line.rsplit(" ", 1)[0] for line in lines(path)]  # without the key
    assert ran == [
        *["reserve book", "reserve pen", "charge 12 attempt-1", "ship"],
        *["reserve pen", "charge 12 attempt-1", "ship"],  # the fork: from the second reservation on
    ]


async def test_an_unknown_step_or_occurrence_is_refused_and_nothing_is_created(
    engine: Engine, tmp_path: Path
) -> None:
    path = str(tmp_path / "m")
    async with engine.worker([fork_flows.order]):
        old = await engine.client.start(fork_flows.order, path)
        await old.result(timeout=20)
    with pytest.raises(wayline.ForkRefusedError) as err:
        await engine.client.fork(old.run_id, from_step="fork_flows.refund")
    assert err.value.message == (
        f"run {old.run_id} has no step 'fork_flows.refund' (its steps: fork_flows.reserve (x2),"
        " fork_flows.charge, fork_flows.ship)"
    )
    twice = r"called step 'fork_flows\.reserve' 2 times"
    with pytest.raises(wayline.ForkRefusedError, match=twice):
        await engine.client.fork(old.run_id, from_step="fork_flows.reserve#3")
    with pytest.raises(wayline.ForkRefusedError, match="NAME#N"):
        await engine.client.fork(old.run_id, from_step="fork_flows.reserve#0")
    assert [r.run_id for r in await engine.client.list_runs()] == [old.run_id]


async def test_a_live_run_is_forked_without_being_touched(engine: Engine, tmp_path: Path) -> None:
    path = str(tmp_path / "m")
    async with engine.worker([fork_flows.slow_order]):
        old = await engine.client.start(fork_flows.slow_order, path, 600.0)

        await wait_for(lambda: _sleeping(engine, old.run_id), timeout=20)
        before = await old.events()
        fork = await engine.client.fork(old.run_id, from_step="fork_flows.reserve")
        await wait_for(lambda: _sleeping(engine, fork.run_id), timeout=20)
        assert await fork.wake() == ["w1"]  # the fork's own sleep, fired early
        assert await fork.result(timeout=20) == ["reserved book", "charged 3"]
        assert await old.events() == before  # the old run was only read
        assert await old.status() is RunStatus.RUNNING
        await old.terminate("done with it")
    assert [line.split()[0] for line in lines(path)] == ["reserve", "reserve", "charge"]


async def _sleeping(engine: Engine, run_id: str) -> bool:
    return bool(of_type(await engine.world.list_events(run_id), EventType.WAIT_CREATED))


async def test_a_completed_sleep_before_the_fork_point_is_reused(
    engine: Engine, tmp_path: Path
) -> None:
    path = str(tmp_path / "m")
    async with engine.worker([fork_flows.nap_order]):
        old = await engine.client.start(fork_flows.nap_order, path)
        await old.result(timeout=20)
        fork = await engine.client.fork(old.run_id, from_step="fork_flows.charge")
        assert await fork.result(timeout=20) == ["reserved book", "charged 5"]
    events = await fork.events()
    assert len(of_type(events, EventType.WAIT_CREATED)) == 1
    assert len(of_type(events, EventType.WAIT_COMPLETED)) == 1
    assert [line.split()[0] for line in lines(path)] == ["reserve", "charge", "charge"]


@pytest.mark.parametrize("dispose", [True, False], ids=["disposed", "held-until-the-end"])
async def test_an_answered_hook_before_the_fork_point_is_reused(
    engine: Engine, tmp_path: Path, dispose: bool
) -> None:
    path, token = str(tmp_path / "m"), f"approve-{tmp_path.name}"
    async with engine.worker([fork_flows.approved_order]):
        old = await engine.client.start(fork_flows.approved_order, path, token, dispose)
        await engine.client.wait_for_hook(token, timeout=20)
        await engine.client.resume_hook(token, "yes")
        await old.result(timeout=20)
        fork = await engine.client.fork(old.run_id, from_step="fork_flows.charge")
        assert await fork.result(timeout=20) == ["reserved book", "yes", "charged 9"]
    events = await fork.events()
    assert len(of_type(events, EventType.HOOK_RECEIVED)) == 1  # the old run's answer
    # disposed in the old run, or recorded so by the fork: the old run's end freed its token
    assert len(of_type(events, EventType.HOOK_DISPOSED)) == 1
    assert [line.split()[0] for line in lines(path)] == ["reserve", "charge", "charge"]
