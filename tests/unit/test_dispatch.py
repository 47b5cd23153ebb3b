"""The ownership state machine, the lease arithmetic and the decision table (seed 000)."""

from __future__ import annotations

import itertools

import pytest

from wayline._core.dispatch import (
    Action,
    StepState,
    backstop_key,
    decide,
    lease_remaining,
    ownership_active,
    step_dispatch_key,
)
from wayline._core.events import Event, EventType
from wayline._core.futures import WFuture
from wayline._core.replay import StepRecord

RUN, CID, ME, OTHER = "wf_run", "s1", "m-owner", "m-other"
T0 = 1_000_000.0


def _decide(
    state: StepState,
    *,
    me: str = ME,
    now: float = T0 + 10,
    lease: float = 860.0,
    enabled: bool = True,
    arriving: str | None = None,
):  # type: ignore[no-untyped-def]
    return decide(
        state,
        run_id=RUN,
        correlation_id=CID,
        my_message_id=me,
        now=now,
        lease=lease,
        ownership_enabled=enabled,
        arriving_backstop_key=arriving,
    )


# --- the ownership state machine, derived from the log alone ---------------------------------


def _record() -> StepRecord:
    return StepRecord(CID, "work", None, {"args": []}, 0, WFuture())


def _feed(rec: StepRecord, *events: tuple[EventType, dict[str, object], float]) -> None:
    """Apply step events the way the replay does (tested end to end in tests/runtime)."""
    from wayline._core.replay import Replay

    replay = Replay.__new__(Replay)
    replay.steps = {CID: rec}
    replay.open_steps = {CID: rec}
    replay._order = 0
    rec.created = True
    for i, (t, data, at) in enumerate(events):
        replay._apply(Event(RUN, i + 1, t, CID, data, at))


def test_stamp_then_wake_sees_owner_then_retrying_clears_for_good() -> None:
    rec = _record()
    _feed(rec, (EventType.STEP_STARTED, {"attempt": 1, "ownerMessageId": ME}, T0))
    assert ownership_active(rec.state()) and rec.owner == ME
    assert _decide(rec.state(), me=OTHER).action is Action.ARM_BACKSTOP
    _feed(rec, (EventType.STEP_RETRYING, {"error": {}}, T0 + 1))
    assert not ownership_active(rec.state())
    # a later stamped start cannot bring ownership back after step_retrying
    _feed(rec, (EventType.STEP_STARTED, {"attempt": 2, "ownerMessageId": ME}, T0 + 2))
    assert not ownership_active(rec.state())
    assert _decide(rec.state(), me=ME).action is Action.ENQUEUE


def test_bare_start_clears_and_restamp_restores() -> None:
    rec = _record()
    _feed(
        rec,
        (EventType.STEP_STARTED, {"attempt": 1, "ownerMessageId": ME}, T0),
        (EventType.STEP_STARTED, {"attempt": 2}, T0 + 1),
    )
    assert not ownership_active(rec.state())
    _feed(rec, (EventType.STEP_STARTED, {"attempt": 3, "ownerMessageId": OTHER}, T0 + 2))
    assert ownership_active(rec.state()) and rec.owner == OTHER
    assert rec.last_started_at == T0 + 2  # latest start wins, its stamp anchors the lease


def test_events_without_owner_read_as_unowned() -> None:
    rec = _record()
    _feed(rec, (EventType.STEP_STARTED, {"attempt": 1}, T0))  # older data: no ownerMessageId
    assert not ownership_active(rec.state())
    assert _decide(rec.state()).action is Action.ENQUEUE


# --- lease arithmetic ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("started", "now", "lease", "expected"),
    [
        (T0, T0, 860, 860),
        (T0, T0 + 60, 860, 800),
        (T0, T0 + 860, 860, 0),
        (T0, T0 + 10_000, 860, 0),
        (T0, T0 - 30, 860, 860),  # local clock 30 s behind the world: clamped to the lease
        (T0, T0 - 30, 2000, 900),  # and the lease itself is clamped to 900
        (None, T0, 860, 0),  # missing stamp: immediate enqueue
        (float("nan"), T0, 860, 0),
        (0.0, T0, 860, 0),
    ],
)
def test_lease_remaining(started: float | None, now: float, lease: float, expected: float) -> None:
    assert lease_remaining(StepState(ME, started), now, lease) == pytest.approx(expected)


# --- the decision table, row by row ---------------------------------------------------------


def test_owner_executes_here() -> None:
    d = _decide(StepState(ME, T0))
    assert d.action is Action.EXECUTE_OWNED


def test_non_owner_arms_backstop_for_the_lease_remainder() -> None:
    d = _decide(StepState(ME, T0), me=OTHER, now=T0 + 100)
    assert d.action is Action.ARM_BACKSTOP
    assert d.delay_seconds == pytest.approx(760)
    assert d.idempotency_key == backstop_key(RUN, CID, T0)


@pytest.mark.parametrize(
    "state",
    [
        StepState(None, T0),  # never owned (eager) / bare start
        StepState(ME, T0, saw_retrying=True),  # lapsed
        StepState(ME, T0 - 900),  # lease expired
        StepState(ME, None),  # unusable timestamp
    ],
)
def test_unowned_lapsed_or_expired_enqueue_keyed_by_the_step(state: StepState) -> None:
    for me in (ME, OTHER):
        d = _decide(state, me=me)
        assert d.action is Action.ENQUEUE
        assert d.idempotency_key == step_dispatch_key(RUN, CID)
        assert d.delay_seconds == 0


def test_kill_switch_always_enqueues() -> None:
    for me in (ME, OTHER):
        assert _decide(StepState(ME, T0), me=me, enabled=False).action is Action.ENQUEUE


def test_table_is_exhaustive() -> None:
    """Every combination lands on exactly the row the seed's table names."""
    owners = [None, ME, OTHER]
    stamps = [None, T0, T0 - 2000]
    for owner, stamp, retrying, enabled, me in itertools.product(
        owners, stamps, [False, True], [False, True], [ME, OTHER]
    ):
        state = StepState(owner, stamp, retrying)
        d = _decide(state, me=me, enabled=enabled)
        active = owner is not None and not retrying and stamp is not None and stamp + 860 > T0 + 10
        if not enabled or not active:
            expected = Action.ENQUEUE
        elif owner == me:
            expected = Action.EXECUTE_OWNED
        else:
            expected = Action.ARM_BACKSTOP
        assert d.action is expected, (owner, stamp, retrying, enabled, me)


# --- backstop keys ---------------------------------------------------------------------------


def test_backstop_key_is_never_the_step_key_and_is_scoped_to_the_epoch() -> None:
    k1 = backstop_key(RUN, CID, T0)
    assert k1 != step_dispatch_key(RUN, CID)
    assert backstop_key(RUN, CID, T0) == k1  # stable within an epoch
    assert backstop_key(RUN, CID, T0 + 5) != k1  # a re-stamp opens a new epoch
    assert backstop_key(RUN, "s2", T0) != k1  # isolated per correlation id
    assert backstop_key("wf_other", CID, T0) != k1


class LifetimeDedupeQueue:
    """A queue model with world-local's retention: a key is held while its message is stored
    or in flight, and released on ack."""

    def __init__(self) -> None:
        self.held: dict[str, int] = {}
        self.next_id = 0
        self.sent: list[str] = []

    def enqueue(self, key: str) -> int:
        if key in self.held:
            return self.held[key]
        self.next_id += 1
        self.held[key] = self.next_id
        self.sent.append(key)
        return self.next_id

    def ack(self, key: str) -> None:
        self.held.pop(key, None)


def test_owner_recovery_rearm_walk_against_lifetime_dedupe() -> None:
    """Seed 000 lesson 2: a backstop firing during a lease that owner recovery refreshed must be
    able to publish its replacement while it is itself still in flight."""
    q = LifetimeDedupeQueue()
    # epoch 1: owner stamps at T0; a hook wake arms the backstop
    d1 = _decide(StepState(ME, T0), me=OTHER, now=T0 + 1)
    q.enqueue(d1.idempotency_key)
    # owner crashes; its redelivery re-stamps at T0 + 300 (owned recovery)
    restamped = StepState(ME, T0 + 300)
    # the epoch-1 backstop fires at T0 + 860 while the refreshed lease is still active
    d2 = _decide(restamped, me="m-backstop-1", now=T0 + 861, arriving=d1.idempotency_key)
    assert d2.action is Action.ARM_BACKSTOP
    first_id = q.held[d1.idempotency_key]  # still in flight: not acked yet
    assert q.enqueue(d2.idempotency_key) != first_id  # a fresh key: the replacement is published
    q.ack(d1.idempotency_key)
    # the recovered owner dies with its budget spent; the epoch-2 backstop fires after expiry
    d3 = _decide(restamped, me="m-backstop-2", now=T0 + 300 + 861, arriving=d2.idempotency_key)
    assert d3.action is Action.ENQUEUE  # lease over: the step is dispatched, nothing wedges
    assert q.sent == [d1.idempotency_key, d2.idempotency_key]


def test_fixed_key_would_wedge_the_walk() -> None:
    """The rejected shape: with one key per step the replacement dedupes against itself."""
    q = LifetimeDedupeQueue()
    fixed = f"{RUN}:{CID}:backstop"
    q.enqueue(fixed)
    assert q.enqueue(fixed) == 1 and q.sent == [fixed]  # the re-arm is dropped


def test_backstop_firing_early_under_clock_skew_rearms_under_a_successor_key() -> None:
    """A local clock behind the world's makes the epoch's own backstop see lease left; its key
    is still held while it is in flight, so it must re-arm under another key."""
    key = backstop_key(RUN, CID, T0)
    d = _decide(StepState(ME, T0), me="m-backstop", now=T0 + 859.5, arriving=key)
    assert d.action is Action.ARM_BACKSTOP and d.idempotency_key != key
    assert d.idempotency_key.startswith(key) and d.delay_seconds == pytest.approx(0.5)
    again = _decide(StepState(ME, T0), me="m-b2", now=T0 + 859.9, arriving=d.idempotency_key)
    assert again.idempotency_key not in (key, d.idempotency_key)


def test_retry_handoff_key_is_not_the_backstop_key() -> None:
    """Seed 000 lesson 1: a pending backstop must not absorb the retry handoff."""
    q = LifetimeDedupeQueue()
    q.enqueue(_decide(StepState(ME, T0), me=OTHER).idempotency_key)
    handoff = step_dispatch_key(RUN, CID)
    before = len(q.sent)
    q.enqueue(handoff)
    assert len(q.sent) == before + 1


@pytest.mark.parametrize(
    ("owner_lease", "reader_lease", "expected"),
    [
        (860.0, 2.0, 800.0),  # a reader of a shorter lease waits for the owner's
        (2.0, 860.0, 800.0),  # a recorded shorter lease never shortens the reader's
        (None, 2.0, 0.0),  # older logs: the reader's own
        (5000.0, 2.0, 840.0),  # still clamped to 900
        (float("inf"), 2.0, 0.0),  # an unusable record is ignored
        (float("nan"), 2.0, 0.0),
    ],
)
def test_the_lease_is_the_longer_of_the_owners_and_the_readers(
    owner_lease: float | None, reader_lease: float, expected: float
) -> None:
    state = StepState(ME, T0, owner_lease=owner_lease)
    assert lease_remaining(state, T0 + 60, reader_lease) == pytest.approx(expected)


def test_the_owners_lease_is_read_from_its_start_and_lapses_with_it() -> None:
    rec = _record()
    stamped = {"attempt": 1, "ownerMessageId": ME, "lease": 860}
    _feed(rec, (EventType.STEP_STARTED, stamped, T0))
    assert rec.state().owner_lease == 860
    _feed(rec, (EventType.STEP_STARTED, {"attempt": 2}, T0 + 1))  # a bare start clears it
    assert rec.state().owner_lease is None
