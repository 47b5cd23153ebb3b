"""Bytes written by hand into the NATS queue's side stores and headers: the hand-back notes
(``h<seq>`` in the idem bucket) and the ``Wayline-Id`` header. A bad value fences only the
message it names, with a typed error or a sane reading, never a crash of the receive loop."""

from __future__ import annotations

import pytest

from tests.nats_fixtures import OpenWorlds


@pytest.mark.parametrize("note", [b"x", b"\xff\xfe", b"1e9999", b"-5", b"99999999999"])
async def test_a_garbage_hand_back_note_does_not_break_receive(
    open_nats_world: OpenWorlds, note: bytes
) -> None:
    world = await open_nats_world(visibility_seconds=5)
    await world.enqueue("flow", {"runId": "wf_" + "0" * 32})
    [first] = await world.receive("flow", wait_seconds=2)
    seq = int(first.handle.msg.metadata.sequence.stream)
    assert await world.retry(first, 0)
    await world._queue._idem.put(f"h{seq}", note)  # behind the world's back
    # any error here would end the worker's receive loop (only WorldUnavailableError is
    # retried there), and the note stays: the message would never be delivered again
    [again] = await world.receive("flow", wait_seconds=2)
    assert again.message_id == first.message_id
    assert again.attempt >= 1, again.attempt  # an attempt is never below 1
    assert again.attempt <= 2, again.attempt  # a forged note never spends the budget
    assert await world.ack(again)
