"""Redrive on both worlds: a failed run goes on in place from its failed step, with a fresh
attempt budget and the step's own idempotency key; the steps completed before it do not run
again; a run that has not failed, or whose definition no live worker serves, is refused and
nothing is recorded."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

import wayline
from tests.runtime import fork_flows
from tests.runtime.flows import lines
from tests.runtime.harness import Engine, of_type
from wayline._core.events import EventType, RunStatus


def _unbreak(path: str) -> None:
    Path(path + ".broken").unlink()


async def test_a_failed_run_goes_on_from_its_failed_step_in_place(
    engine: Engine, tmp_path: Path
) -> None:
    path = str(tmp_path / "m")
    async with engine.worker([fork_flows.order]):
        handle = await fork_flows.failed_run(engine.client, fork_flows.order, path)
        _unbreak(path)
        redrive = await engine.client.redrive(
            handle.run_id, "the card was updated", by="alice@example.com"
        )
        assert (redrive.run_id, redrive.step, redrive.step_id) == (
            handle.run_id,
            "fork_flows.charge#1",
            "s3",
        )
        assert await handle.result(timeout=20) == [
            "reserved book",
            "reserved pen",
            "charged 12",
            "shipped",
        ]
    key = f"{handle.run_id}:fork_flows.charge#0:forward"
    assert lines(path) == [
        f"reserve book {handle.run_id}:fork_flows.reserve#0:forward",
        f"reserve pen {handle.run_id}:fork_flows.reserve#1:forward",
        f"charge 12 attempt-1 {key}",
        f"charge 12 attempt-1 {key}",  # the same key, a fresh budget numbered from 1 again
        f"ship {handle.run_id}:fork_flows.ship#0:forward",
    ]
    events = await handle.events()
    [failed, redriven] = of_type(events, EventType.RUN_FAILED, EventType.RUN_REDRIVEN)
    assert failed.seq < redriven.seq
    assert redriven.correlation_id == "s3"
    assert redriven.data == {
        "reason": "the card was updated",
        "by": "alice@example.com",
        "stepId": "s3",
        "step": "fork_flows.charge#1",
    }
    info = await engine.client.get_run(handle.run_id)
    assert info.status is RunStatus.COMPLETED and info.error is None


async def test_a_redriven_step_gets_a_fresh_retry_budget(engine: Engine, tmp_path: Path) -> None:
    path = str(tmp_path / "m")
    async with engine.worker([fork_flows.flaky_order]):
        handle = await fork_flows.failed_run(engine.client, fork_flows.flaky_order, path)
        await handle.redrive("try once more", by="bob")  # still broken: it fails again
        with pytest.raises(wayline.RunFailedError):
            await handle.result(timeout=20)
        _unbreak(path)
        await handle.redrive("fixed", by="bob")
        assert await handle.result(timeout=20) == ["reserved book", "charged 7", "shipped"]
    tries = [line.split()[2] for line in lines(path) if line.startswith("flaky")]
    assert tries == ["attempt-1", "attempt-2", "attempt-1", "attempt-2", "attempt-1"]
    assert len(of_type(await handle.events(), EventType.RUN_REDRIVEN)) == 2


async def test_a_run_that_has_not_failed_is_refused(engine: Engine, tmp_path: Path) -> None:
    path = str(tmp_path / "m")
    async with engine.worker([fork_flows.order]):
        handle = await engine.client.start(fork_flows.order, path)
        await handle.result(timeout=20)
        before = await handle.events()
        with pytest.raises(wayline.RedriveRefusedError) as err:
            await engine.client.redrive(handle.run_id, "why not")
    assert err.value.message == (f"run {handle.run_id} is completed; only a failed run is redriven")
    assert await handle.events() == before


async def test_a_run_whose_own_code_failed_after_a_caught_step_failure_is_refused(
    engine: Engine, tmp_path: Path
) -> None:
    """The charge failed, the workflow caught it and then raised on its own: re-opening the
    charge would replay a path the code did not take, so the redrive is refused."""
    path = str(tmp_path / "m")
    async with engine.worker([fork_flows.forgiving_order]):
        handle = await fork_flows.failed_run(engine.client, fork_flows.forgiving_order, path)
        before = await handle.events()
        with pytest.raises(wayline.RedriveRefusedError) as err:
            await engine.client.redrive(handle.run_id, "card fixed")
    assert "failed outside a step" in err.value.message
    assert await handle.events() == before


async def test_a_run_no_live_worker_serves_is_refused_naming_it(
    engine: Engine, tmp_path: Path
) -> None:
    path = str(tmp_path / "m")
    async with engine.worker([fork_flows.order]):
        handle = await fork_flows.failed_run(engine.client, fork_flows.order, path)
    # the worker withdrew what it served on its way out: nobody would drive the run
    before = await handle.events()
    with pytest.raises(wayline.RedriveRefusedError) as err:
        await engine.client.redrive(handle.run_id, "fixed")
    identity = fork_flows.order.identity_record()["identity"][:12]
    assert err.value.message == (
        f"run {handle.run_id}: no live worker serves workflow 'fork_flows.order' identity "
        f"{identity} revision {fork_flows.order.revision}"
    )
    assert await handle.events() == before
    assert (await handle.status()) is RunStatus.FAILED
    # a dry run checks the same and records nothing
    with pytest.raises(wayline.RedriveRefusedError):
        await engine.client.redrive(handle.run_id, dry_run=True)


async def test_two_redrives_at_once_record_one(engine: Engine, tmp_path: Path) -> None:
    path = str(tmp_path / "m")
    async with engine.worker([fork_flows.order]):
        handle = await fork_flows.failed_run(engine.client, fork_flows.order, path)
        _unbreak(path)
        both = await asyncio.gather(
            engine.client.redrive(handle.run_id, "one", by="alice"),
            engine.client.redrive(handle.run_id, "two", by="bob"),
            return_exceptions=True,
        )
        await handle.result(timeout=20)
    refused = [r for r in both if isinstance(r, wayline.RedriveRefusedError)]
    assert len(refused) == 1 and "only a failed run is redriven" in refused[0].message
    assert len(of_type(await handle.events(), EventType.RUN_REDRIVEN)) == 1
    assert [line.split()[0] for line in lines(path)].count("charge") == 2
