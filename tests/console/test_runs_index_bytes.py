"""The console's runs page over a NATS runs index that holds bytes no writer made (a time
token that decodes to NaN, bad JSON, a huge body, subjects of the wrong shape): the page, its
cursor and the counts answer 200 with every run, as without them."""

from __future__ import annotations

import base64

import pytest

from tests.console.conftest import Console
from wayline._core.events import EventType, NewEvent
from wayline._core.ids import new_run_id

_WF = "console-index-bytes-wf"


async def test_hostile_bytes_in_the_runs_index_give_no_error_and_lose_no_run(
    console: Console,
) -> None:
    world = console.engine.world
    if not hasattr(world, "follow_runs") or not hasattr(world, "_runs"):
        pytest.skip("the runs index's stream is NATS's")
    ids = [new_run_id() for _ in range(3)]
    for i, run_id in enumerate(ids):
        created = {"workflow": _WF, "input": [i]}
        await world.append(run_id, [NewEvent(EventType.RUN_CREATED, data=created)], expected_seq=0)
    assert await world.flush_runs_index()
    first = await console.http.get("/api/runs", params={"workflow": _WF})  # follows the runs
    assert first.status_code == 200
    index = world._listing.runs()
    prefix = index.names.prefix
    for subject, data in [
        (f"{prefix}.ri.running.{_WF}.7ff8000000000000.{new_run_id()}", b"{}"),
        (f"{prefix}.ri.pending.{_WF}.7ff0000000000000.{ids[0]}", b'{"seq": 99}'),
        (f"{prefix}.ri.running.{_WF}.zz.{new_run_id()}", b"not json {"),
        (f"{prefix}.ri.x", b"\xff"),
        (f"{prefix}.ri.failed.{_WF}.3ff0000000000000.{new_run_id()}", b"9" * 500_000),
    ]:
        await world._js.publish(subject, data, stream=index.stream)
    seen: list[str] = []
    cursor: str | None = None
    for _ in range(10):
        params = {"limit": "1", "workflow": _WF, **({"cursor": cursor} if cursor else {})}
        answer = await console.http.get("/api/runs", params=params)
        assert answer.status_code == 200, answer.text
        seen += [r["runId"] for r in answer.json()["runs"]]
        cursor = answer.json()["nextCursor"]
        if cursor is None:
            break
    assert sorted(seen) == sorted(ids)
    pending = await console.http.get("/api/runs", params={"status": "pending", "workflow": _WF})
    assert pending.status_code == 200, pending.text
    assert sorted(r["runId"] for r in pending.json()["runs"]) == sorted(ids)
    assert pending.json()["counts"]["pending"] == 3


@pytest.mark.parametrize(
    "raw",
    [b"[1" + b"0" * 400 + b', "wf_x"]', b'[NaN, "wf_x"]', b'[Infinity, "wf_x"]', b'[-1e999, "x"]'],
    ids=["huge-int", "nan", "infinity", "minus-infinity"],
)
async def test_a_cursor_with_a_time_no_run_has_is_a_clear_400(console: Console, raw: bytes) -> None:
    """A cursor this server never gave, whose time is no time (too large for a float, NaN, an
    infinity): a 400 that says so, not a 500 and not an empty page."""
    cursor = base64.urlsafe_b64encode(raw).decode().rstrip("=")
    answer = await console.http.get("/api/runs", params={"cursor": cursor})
    assert answer.status_code == 400, answer.text
    assert answer.json()["error"]["code"] == "BAD_REQUEST"
