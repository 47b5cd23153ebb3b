"""Property test (Hypothesis): random append sequences against the embedded world's event log,
checked against an independent model of the rules (DESIGN "The event log is the truth"):
nothing after a terminal run event, one terminal event per step, one ``*_created`` per
correlation id, dense sequence numbers, and rejected appends leave no trace."""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from wayline._core.events import EventType as T
from wayline._core.events import NewEvent
from wayline.errors import WorldError
from wayline.worlds.local import LocalWorld

CIDS = ["s1", "s2", "h1", "w1"]
STEP_EVENTS = [T.STEP_CREATED, T.STEP_STARTED, T.STEP_RETRYING, T.STEP_COMPLETED, T.STEP_FAILED]
RUN_EVENTS = [T.RUN_STARTED, T.RUN_COMPLETED, T.RUN_FAILED, T.RUN_CANCELLED]

ops = st.lists(
    st.one_of(
        st.tuples(st.sampled_from(STEP_EVENTS), st.sampled_from(["s1", "s2"])),
        st.tuples(
            st.sampled_from([T.HOOK_CREATED, T.HOOK_RECEIVED, T.HOOK_DISPOSED]), st.just("h1")
        ),
        st.tuples(st.sampled_from([T.WAIT_CREATED, T.WAIT_COMPLETED]), st.just("w1")),
        st.tuples(st.sampled_from(RUN_EVENTS), st.none()),
    ),
    max_size=25,
)


def model_allows(state: dict[str, object], t: T, cid: str | None) -> bool:
    """The rules, written independently of ``events.apply_transition``."""
    if state["run"] in ("completed", "failed", "cancelled"):
        return False
    if cid is None:
        if t is T.RUN_STARTED:
            return state["run"] == "pending"
        return True
    entity = state.get(cid)
    if t.value.endswith("_created"):
        return entity is None
    if entity is None:
        return False
    if cid.startswith("s"):
        return entity not in ("completed", "failed")
    if cid.startswith("h"):
        return entity != "disposed"
    return entity != "completed"


def model_apply(state: dict[str, object], t: T, cid: str | None) -> None:
    if cid is None:
        state["run"] = {
            T.RUN_STARTED: "running",
            T.RUN_COMPLETED: "completed",
            T.RUN_FAILED: "failed",
            T.RUN_CANCELLED: "cancelled",
        }[t]
        return
    state[cid] = {
        T.STEP_CREATED: "pending",
        T.STEP_STARTED: "running",
        T.STEP_RETRYING: "pending",
        T.STEP_COMPLETED: "completed",
        T.STEP_FAILED: "failed",
        T.HOOK_CREATED: "active",
        T.HOOK_RECEIVED: "active",
        T.HOOK_DISPOSED: "disposed",
        T.WAIT_CREATED: "waiting",
        T.WAIT_COMPLETED: "completed",
    }[t]


async def _check(sequence: list[tuple[T, str | None]]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        async with LocalWorld(Path(tmp) / "w.db") as world:
            run_id = "wf_" + "a" * 32
            await world.append(run_id, [NewEvent(T.RUN_CREATED, data={"workflow": "w"})])
            state: dict[str, object] = {"run": "pending"}
            accepted = 1
            for t, cid in sequence:
                data = {"token": "tok"} if t is T.HOOK_CREATED else {}
                allowed = model_allows(state, t, cid)
                try:
                    await world.append(run_id, [NewEvent(t, cid, data)])
                except WorldError:
                    assert not allowed, (t, cid, state)
                    continue
                assert allowed, (t, cid, state)
                model_apply(state, t, cid)
                accepted += 1
            events = await world.list_events(run_id)
            assert [e.seq for e in events] == list(range(1, accepted + 1))
            terminal = [
                e for e in events if e.type in (T.RUN_COMPLETED, T.RUN_FAILED, T.RUN_CANCELLED)
            ]
            assert len(terminal) <= 1 and (not terminal or terminal[0] is events[-1])
            for cid in ("s1", "s2"):
                ends = [
                    e
                    for e in events
                    if e.correlation_id == cid and e.type in (T.STEP_COMPLETED, T.STEP_FAILED)
                ]
                assert len(ends) <= 1
            info = await world.get_run(run_id)
            assert info is not None and info.status.value == state["run"]


@settings(max_examples=150, deadline=None)
@given(sequence=ops)
def test_the_event_log_enforces_the_rules(sequence: list[tuple[T, str | None]]) -> None:
    asyncio.run(_check(sequence))
