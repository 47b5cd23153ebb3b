"""Review of the forged-seq check (issue #37) on a real nats-server: a doubted run whose log
cannot be read for good (a corrupt log: bytes anyone may publish on the run's subject) must
not be checked again at every catch-up of the console's runs model, one whole-log read each,
forever. A corrupt run is shown ``corrupt`` from its log, never from the index."""

from __future__ import annotations

from typing import Any

import nats
from tests.nats.test_runs_index_forged_seq import HUGE, _forge, _run
from tests.nats_fixtures import OpenWorlds
from wayline._core.events import EventType, NewEvent, RunStatus


async def test_a_doubted_corrupt_run_is_not_read_again_at_every_catch_up(
    open_nats_world: OpenWorlds,
) -> None:
    writer = await open_nats_world()
    run_id = await _run(writer)
    console = await open_nats_world()
    await console.follow_runs()
    model = await console.runs_followed(30.0)
    assert model is not None
    # a forged entry claiming a huge position, then the run's real (later, lower) entry: the
    # forged one is doubted; then the log is made corrupt before the model reads either
    await _forge(writer, run_id, RunStatus.COMPLETED, HUGE)
    await writer.append(run_id, [NewEvent(EventType.RUN_CANCELLED)])
    assert await writer.flush_runs_index()
    await writer._log._js.publish(
        writer.names.run_subject(run_id), b"not an event", stream=writer.names.events_stream
    )
    index = console._listing.runs()
    reads: list[str] = []
    read = index.log_info

    async def counted(asked: str) -> Any:
        reads.append(asked)
        return await read(asked)

    index.log_info = counted
    for _ in range(6):
        await model.catch_up()
    assert reads.count(run_id) <= 1, (
        f"a doubted corrupt run's log was read {reads.count(run_id)} times in 6 catch-ups"
    )


HOSTILE = [b"-5", b"1.5", b"1e999", b'"99"', b"null", b"true", b"9" * 400, b"9" * 5000, b"NaN"]


async def test_hostile_seqs_are_skipped_and_the_real_status_wins(
    open_nats_world: OpenWorlds,
) -> None:
    """Forged bodies whose ``seq`` is negative, a float, a string, huge (past the digits
    ``int`` takes from a string) or missing: each is skipped or disbelieved, never raised, in
    the console's model and in the repair."""
    writer = await open_nats_world()
    runs = [await _run(writer) for _ in HOSTILE]
    console = await open_nats_world()
    await console.follow_runs()
    model = await console.runs_followed(30.0)
    assert model is not None
    index = writer._listing.runs()
    nc = await nats.connect(writer._options.servers, max_reconnect_attempts=0)
    try:
        for run_id, seq in zip(runs, HOSTILE, strict=True):
            info = await writer.get_run(run_id)
            subject = index.subject_of(RunStatus.COMPLETED, info.workflow, info.created_at, run_id)
            body = b'{"workflow": "%s", "run": "%s", "seq": %s}' % (
                info.workflow.encode(),
                run_id.encode(),
                seq,
            )
            await nc.jetstream().publish(subject, body)
    finally:
        await nc.close()
    for run_id in runs:
        await writer.append(run_id, [NewEvent(EventType.RUN_CANCELLED)])
    assert await writer.flush_runs_index()
    for _ in range(3):
        await model.catch_up()
    assert model.counts(None) == {RunStatus.CANCELLED: len(runs)}
    for run_id in runs:
        await index.put(await writer.get_run(run_id))
    assert await writer.count_runs() == {RunStatus.CANCELLED: len(runs)}
