"""Record the planner's golden histories: ``python tools/record_golden.py``.

``--answers`` keeps the recorded logs and writes only the planner's answers again; ``--dump``
prints the recorded runs' logs, to choose where a new case cuts one; ``--only CASE...``
records the named cases alone and keeps every other line as it is (a new case, without
re-recording the others).

Runs the small workflows of ``tests/golden/workflows.py`` on an embedded world, cuts each
run's log where a case of the decision table or the planner stands (a prefix of a real log is
the log as it stood at that moment), and writes one ``wayline-history/1`` line per case to
``tests/golden/decisions.jsonl``, with the probes the case is asked at and the planner's
answer to each (``tests/golden/planner.py``). A line cut from a real run is marked
``"recorded": "run"``; the few cases a real run cannot write are built from a recorded log by
a function here (``HAND``) and marked ``"recorded": "hand"``.

Read every changed ``expect`` before committing a re-recording: the file is the reviewed
statement of what the planner decides, and ``tests/unit/test_golden_decisions.py`` holds the
planner to it.
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.golden import planner, workflows  # noqa: E402

import wayline  # noqa: E402
from wayline._core.dispatch import backstop_key  # noqa: E402
from wayline._core.events import Event, EventType  # noqa: E402
from wayline._core.histories import FORMAT, history_of, parse_history  # noqa: E402

OUT = ROOT / "tests" / "golden" / "decisions.jsonl"
LEASE = planner.LEASE


@dataclass
class Case:
    """One golden history: a run's log up to ``through`` and the probes it is asked at."""

    name: str
    run: str
    """Which recorded run (a key of ``record``'s runs)."""
    why: str
    through: tuple[str, str | None, int] | None
    """Cut after the ``n``-th (1-based) event of this type and correlation id (None: whole)."""
    probes: Callable[[list[Event]], list[dict[str, Any]]]
    code: str | None = None
    """Replay against another definition of the workflow (``workflows.CODE``)."""
    extra: dict[str, Any] = field(default_factory=dict)


def cut(events: list[Event], through: tuple[str, str | None, int] | None) -> list[Event]:
    if through is None:
        return list(events)
    kind, cid, nth = through
    seen = 0
    for i, e in enumerate(events):
        if str(e.type) == kind and e.correlation_id == cid:
            seen += 1
            if seen == nth:
                return list(events[: i + 1])
    raise SystemExit(f"no {kind} {cid} #{nth} in the log: {[str(e.type) for e in events]}")


def started(events: list[Event], cid: str) -> Event:
    return [e for e in events if e.type is EventType.STEP_STARTED and e.correlation_id == cid][-1]


def last(events: list[Event]) -> float:
    return events[-1].created_at


def owner(events: list[Event], cid: str) -> str:
    return str(started(events, cid).data["ownerMessageId"])


def first_owner(events: list[Event], cid: str) -> str:
    """The message id that stamped the step's first start (before any retry)."""
    first = next(e for e in events if e.type is EventType.STEP_STARTED and e.correlation_id == cid)
    return str(first.data["ownerMessageId"])


async def record() -> dict[str, list[Event]]:
    """Run the workflows once each and return their logs by name."""
    runs: dict[str, list[Event]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        world = wayline.LocalWorld(Path(tmp) / "wayline.db")
        async with world, wayline.Worker(world, workflows.WORKFLOWS):
            client = wayline.Client(world)

            async def ended(handle: wayline.RunHandle[Any]) -> None:
                try:
                    await handle.result(timeout=30)
                except (wayline.RunFailedError, wayline.RunCancelledError):
                    pass

            async def status(handle: wayline.RunHandle[Any], want: wayline.RunStatus) -> None:
                for _ in range(600):
                    if await handle.status() is want:
                        return
                    await asyncio.sleep(0.05)
                raise SystemExit(f"run {handle.run_id} never reached {want}")

            handles: dict[str, wayline.RunHandle[Any]] = {}
            handles["pair"] = await client.start(workflows.pair, "p")
            handles["retrying"] = await client.start(workflows.retrying, "r")
            await ended(handles["pair"])
            await ended(handles["retrying"])
            # resumed: the refund fails once, a person resumes, the refund then succeeds
            workflows.REFUND_FAILURES["resumed"] = 1
            handles["saga-resumed"] = await client.start(workflows.saga, "resumed")
            await status(handles["saga-resumed"], wayline.RunStatus.COMPENSATION_STUCK)
            await client.resume_compensation(handles["saga-resumed"].run_id)
            await ended(handles["saga-resumed"])
            # abandoned: the refund always fails, a person gives up the unwind
            workflows.REFUND_FAILURES["abandoned"] = 10**6
            handles["saga-abandoned"] = await client.start(workflows.saga, "abandoned")
            await status(handles["saga-abandoned"], wayline.RunStatus.COMPENSATION_STUCK)
            await client.abandon_compensation(handles["saga-abandoned"].run_id)
            await ended(handles["saga-abandoned"])
            # one payload sent twice under one delivery id
            handles["approval"] = await client.start(workflows.approval, "golden-approval")
            await client.wait_for_hook("golden-approval", timeout="30s")
            for _ in range(2):
                await client.resume_hook("golden-approval", "yes", delivery_id="d-1")
            await ended(handles["approval"])
            handles["nap"] = await client.start(workflows.nap, "n")
            await ended(handles["nap"])
            handles["parent"] = await client.start(workflows.parent, "k")
            await ended(handles["parent"])
            handles["cancelled"] = await client.start(workflows.cancelled, "c")
            await workflows.SLOW_STARTED.setdefault("c", asyncio.Event()).wait()
            await client.cancel(handles["cancelled"].run_id, "the customer changed their mind")
            workflows.SLOW_GO.setdefault("c", asyncio.Event()).set()
            await ended(handles["cancelled"])
            # a token another run holds: the world refuses the batch of each run that waits
            # on it (HOOK_CONFLICT), once before any step and once after a reserved step
            handles["holder"] = await client.start(workflows.approval, HELD_TOKEN)
            await client.wait_for_hook(HELD_TOKEN, timeout="30s")
            handles["conflict-at-once"] = await client.start(workflows.conflict_at_once, HELD_TOKEN)
            await ended(handles["conflict-at-once"])
            handles["conflict-after-a-step"] = await client.start(
                workflows.conflict_after_a_step, "x", HELD_TOKEN
            )
            await ended(handles["conflict-after-a-step"])
            # paused while its step's body runs: the body records its result over the pause,
            # and the unpause lets the run end
            handles["held"] = await client.start(workflows.held, "h")
            await workflows.SLOW_STARTED.setdefault("h", asyncio.Event()).wait()
            await client.pause(handles["held"].run_id, "a person looks at it")
            workflows.SLOW_GO.setdefault("h", asyncio.Event()).set()
            await completed(world, handles["held"].run_id, "s1")
            await client.unpause(handles["held"].run_id)
            await ended(handles["held"])
            for name, handle in handles.items():
                runs[name] = await world.list_events(handle.run_id)
            kid = next(
                e.data["childRunId"] for e in runs["parent"] if e.type is EventType.CHILD_CREATED
            )
            runs["kid"] = await world.list_events(str(kid))
    return runs


HELD_TOKEN = "golden-held-by-another-run"
"""The token the holder run waits on, which the conflicting runs ask for too."""


async def completed(world: wayline.LocalWorld, run_id: str, cid: str) -> None:
    """Wait until the step ``cid``'s completion is in the run's log."""
    for _ in range(600):
        events = await world.list_events(run_id)
        if any(e.type is EventType.STEP_COMPLETED and e.correlation_id == cid for e in events):
            return
        await asyncio.sleep(0.05)
    raise SystemExit(f"step {cid} of run {run_id} never completed")


def at(now: float, me: str, **more: Any) -> dict[str, Any]:
    return {"now": round(now, 6), "me": me, **more}


OTHER = "other-delivery"
"""A message id no recorded run used: a delivery that does not own the step."""


def step_probe(cid: str, offset: float, *, mine: bool = False, **more: Any) -> Callable[..., Any]:
    """A probe ``offset`` seconds after ``cid``'s latest start, by its owner or another."""

    def probes(events: list[Event]) -> list[dict[str, Any]]:
        start = started(events, cid)
        me = owner(events, cid) if mine else OTHER
        return [at(start.created_at + offset, me, **more)]

    return probes


def backstop_probe(cid: str, offset: float) -> Callable[..., Any]:
    """The step's backstop wake arriving ``offset`` seconds after the step's latest start."""

    def probes(events: list[Event]) -> list[dict[str, Any]]:
        start = started(events, cid)
        key = backstop_key(start.run_id, cid, start.created_at)
        return [at(start.created_at + offset, "backstop-delivery", backstopKey=key)]

    return probes


def after_last(offset: float = 0.5, *, me: str = OTHER, **more: Any) -> Callable[..., Any]:
    return lambda events: [at(last(events) + offset, me, **more)]


def by_first_owner(cid: str, offset: float) -> Callable[..., Any]:
    """A probe ``offset`` seconds after the last event, by the step's first owner."""
    return lambda events: [at(last(events) + offset, first_owner(events, cid))]


def wait_probe(offset: float, **more: Any) -> Callable[..., Any]:
    """A probe ``offset`` seconds after the run's first wait is due."""

    def probes(events: list[Event]) -> list[dict[str, Any]]:
        wait = next(e for e in events if e.type is EventType.WAIT_CREATED)
        return [at(float(wait.data["resumeAt"]) + offset, OTHER, **more)]

    return probes


def refused(events: list[Event]) -> dict[str, Any]:
    """The failure the world found in the recorded run (the error its ``run_failed`` or
    ``run_compensating`` records), as a probe's ``refused``."""
    end = next(
        e
        for e in events
        if e.type in (EventType.RUN_FAILED, EventType.RUN_COMPENSATING) and "error" in e.data
    )
    error = dict(end.data["error"])
    code, message = error.pop("code"), error.pop("message")
    error.pop("name", None)
    return {"code": code, "message": message, "fields": error}


def refused_after_last(run: str, offset: float = 0.01) -> Callable[..., Any]:
    """A probe just after the cut, by the delivery whose batch the world refused with the
    failure run ``run`` recorded (the run's whole log is read from ``RECORDED``)."""
    return lambda events: [at(last(events) + offset, OTHER, refused=refused(RECORDED[run]))]


RECORDED: dict[str, list[Event]] = {}
"""The recorded runs' whole logs, for the probes that read what a run recorded later."""
A_CONFLICT = {
    "code": "HOOK_CONFLICT",
    "message": f"hook token {HELD_TOKEN!r} is held by another active hook, of run wf_holder",
    "fields": {"token": HELD_TOKEN, "holderRunId": "wf_holder"},
}
"""A refusal given by hand, for a log whose run did not meet one."""


def paused_probes(events: list[Event]) -> list[dict[str, Any]]:
    """The step's owner redelivered 1 s, 40 s and 400 s after the pause (handed back for 2 s,
    10 s and 30 s), and another delivery (acknowledged: it holds nothing)."""
    paused = next(e for e in events if e.type is EventType.RUN_PAUSED).created_at
    me = owner(events, "s1")
    return [at(paused + 1.0, me), at(paused + 40.0, me), at(paused + 400.0, me), at(paused, OTHER)]


S2_STARTED = ("step_started", "s2", 1)
CASES = [
    Case(
        "completed-step-is-not-run-again",
        "pair",
        "The first step completed: the planner creates the second one and never plans the "
        "first again.",
        ("step_completed", "s1", 1),
        by_first_owner("s1", 0.5),
    ),
    Case(
        "owned-step-lease-live-another-delivery-waits",
        "pair",
        "The second step runs under its owner's live lease: another delivery arms a backstop "
        "for the rest of the lease and does not run it.",
        S2_STARTED,
        step_probe("s2", 10.0),
    ),
    Case(
        "owned-step-the-owners-redelivery-recovers-it",
        "pair",
        "The owner's own message, redelivered while its lease is live, runs the body again "
        "(owned recovery).",
        S2_STARTED,
        step_probe("s2", 10.0, mine=True),
    ),
    Case(
        "owned-step-lease-expired-before-the-backstop-take-over",
        "pair",
        "The owner's lease ran out and a plain delivery came first: the step is enqueued "
        "under its own key (taken over by the queue).",
        S2_STARTED,
        step_probe("s2", LEASE + 1.0),
    ),
    Case(
        "owned-step-backstop-fires-early-rearmed",
        "pair",
        "The backstop arrives 5 s before the lease ends by this clock (behind the world's): "
        "re-armed under a successor key for the 5 s left, not dropped as a duplicate.",
        S2_STARTED,
        backstop_probe("s2", LEASE - 5.0),
    ),
    Case(
        "owned-step-past-the-backstop-take-over",
        "pair",
        "The backstop arrives after the lease ended: the step is enqueued under its own key.",
        S2_STARTED,
        backstop_probe("s2", LEASE + 30.0),
    ),
    Case(
        "owned-step-the-owners-longer-lease-wins",
        "pair",
        "A reader configured with a 60 s lease waits for the 860 s its owner recorded.",
        S2_STARTED,
        step_probe("s2", 100.0, lease=60.0),
    ),
    Case(
        "owned-step-reader-clock-behind-clamped-to-one-lease",
        "pair",
        "The reader's clock is 30 s behind the world's stamp: the wait is one lease, no more.",
        S2_STARTED,
        step_probe("s2", -30.0),
    ),
    Case(
        "owned-step-ownership-switched-off",
        "pair",
        "With inline ownership switched off every open step is enqueued at once.",
        S2_STARTED,
        step_probe("s2", 10.0, ownership=False),
    ),
    Case(
        "closing-worker-hands-the-run-back",
        "pair",
        "A closing worker plans nothing and hands the run back.",
        S2_STARTED,
        step_probe("s2", 10.0, closing=True),
    ),
    Case(
        "completed-run-is-done",
        "pair",
        "The run completed: nothing is left to decide.",
        None,
        after_last(),
    ),
    Case(
        "divergence-the-code-no-longer-matches-the-log",
        "pair",
        "The log of golden.pair replayed against a deploy that calls its steps in the other "
        "order: the replay diverges at the first step, with the message a worker records.",
        None,
        after_last(),
        code="golden.pair_reordered",
    ),
    Case(
        "retry-scheduled-ownership-lapsed",
        "retrying",
        "The step's first attempt asked for a retry: ownership lapsed for good, so even the "
        "former owner enqueues it under its own key.",
        ("step_retrying", "s1", 1),
        by_first_owner("s1", 0.01),
    ),
    Case(
        "retry-running-queue-owned",
        "retrying",
        "The retry runs from its step message (a bare start): it is enqueued under the same "
        "key, which the queue deduplicates against the running message.",
        ("step_started", "s1", 2),
        by_first_owner("s1", 0.01),
    ),
    Case(
        "step-failed-terminally-the-unwind-begins",
        "saga-resumed",
        "The third step failed for good: the run unwinds, the charge first, then the "
        "reservation (latest first).",
        ("step_failed", "s3", 1),
        after_last(),
    ),
    Case(
        "compensation-failed-the-run-parks",
        "saga-resumed",
        "The refund failed for good: the unwind's next move is to park the run on it.",
        ("step_failed", "s2.c0", 1),
        after_last(),
    ),
    Case(
        "compensation-stuck-waits-for-a-person",
        "saga-resumed",
        "The run is parked on the failed refund: nothing moves until a person acts.",
        ("run_compensation_stuck", None, 1),
        after_last(),
    ),
    Case(
        "compensation-resumed-tried-again-in-a-new-epoch",
        "saga-resumed",
        "A person resumed the unwind: the refund is tried again (epoch 1).",
        ("run_compensation_resumed", None, 1),
        after_last(),
    ),
    Case(
        "compensations-in-reverse-the-reservation-after-the-refund",
        "saga-resumed",
        "The refund went through on its second epoch: the reservation's reversal is next.",
        ("step_completed", "s2.c1", 1),
        after_last(),
    ),
    Case(
        "compensation-abandoned",
        "saga-abandoned",
        "A person abandoned the parked unwind: the run ends failed, the reservation's "
        "reversal untried.",
        ("run_compensation_abandoned", None, 1),
        after_last(),
    ),
    Case(
        "hook-waiting-nothing-to-plan",
        "approval",
        "The run waits on its hook: no step, no wake to arm.",
        ("hook_created", "h1", 1),
        after_last(),
    ),
    Case(
        "hook-delivered-twice-with-one-delivery-id",
        "approval",
        "The client resumed the hook twice under delivery id d-1: the log holds one payload, "
        "and the step that follows is planned once, with it.",
        ("hook_received", "h1", 1),
        after_last(),
    ),
    Case(
        "sleep-not-due-a-wake-is-armed",
        "nap",
        "The sleep is due in 1 s: the planner arms its wake for then and completes nothing.",
        ("wait_created", "w1", 1),
        wait_probe(-1.0),
    ),
    Case(
        "sleep-due-its-completion-is-written",
        "nap",
        "The sleep is due by this clock: its completion is the next move.",
        ("wait_created", "w1", 1),
        wait_probe(0.5),
    ),
    Case(
        "sleep-wake-early-rearmed-under-a-successor-key",
        "nap",
        "The sleep's own wake arrives 0.2 s early by this clock: re-armed under a successor "
        "key, since its own key is held while it is in flight.",
        ("wait_created", "w1", 1),
        wait_probe(-0.2, payload={"waitId": "w1"}),
    ),
    Case(
        "child-started-the-parent-waits",
        "parent",
        "The child run was created: the parent plans nothing until it ends.",
        ("child_created", "c1", 1),
        after_last(),
    ),
    Case(
        "child-ended-the-parent-goes-on",
        "parent",
        "The child completed: the parent's next step is planned with its output.",
        ("child_completed", "c1", 1),
        after_last(),
    ),
    Case(
        "child-run-completed",
        "kid",
        "The child's own log, ended.",
        None,
        after_last(),
    ),
    Case(
        "cancel-mid-step-waits-for-the-owned-body",
        "cancelled",
        "A cancel arrived while the step's body ran under a live lease: the run unwinds, and "
        "the step is left to its owner (a backstop), not compensated yet.",
        ("run_cancel_requested", None, 1),
        step_probe("s1", 1.0),
    ),
    Case(
        "cancel-mid-step-owner-lease-expired",
        "cancelled",
        "The same cancel, read after the owner's lease expired: the step's outcome is unknown "
        "and it is enqueued.",
        ("run_cancel_requested", None, 1),
        step_probe("s1", LEASE + 1.0),
    ),
    Case(
        "cancel-mid-step-the-body-completed-compensation-next",
        "cancelled",
        "The cancelled step's body completed: its compensation is the unwind's next move.",
        ("step_completed", "s1", 1),
        after_last(),
    ),
    Case(
        "hook-conflict-nothing-to-reverse-fails-at-once",
        "conflict-at-once",
        "The world refused the first batch (the hook's token is held by another run) and no "
        "step completed: the run fails at once, the attributes it set in the refused batch "
        "written first.",
        ("run_started", None, 1),
        refused_after_last("conflict-at-once"),
    ),
    Case(
        "hook-conflict-after-a-step-begins-the-unwind",
        "conflict-after-a-step",
        "The world refused the batch after the reservation completed: the failure begins the "
        "unwind, the attributes set in the refused batch written before run_compensating.",
        ("step_completed", "s1", 1),
        refused_after_last("conflict-after-a-step"),
    ),
    Case(
        "hook-conflict-with-a-child-running-begins-the-unwind",
        "parent",
        "A refusal while a child runs (given by hand: the recorded parent met none): nothing "
        "to reverse, but the child is waited for, so the failure begins the unwind.",
        ("child_created", "c1", 1),
        after_last(refused=A_CONFLICT),
    ),
    Case(
        "hook-conflict-over-a-begun-unwind-ends-the-run",
        "conflict-after-a-step",
        "The unwind has begun (the engine never plans a batch then): a failure is not begun "
        "twice, and the planner ends the run at once.",
        ("run_compensating", None, 1),
        refused_after_last("conflict-after-a-step"),
    ),
    Case(
        "hook-conflict-over-an-ended-run-is-done",
        "conflict-at-once",
        "The run has ended: a failure found afterwards writes nothing.",
        None,
        refused_after_last("conflict-at-once"),
    ),
    Case(
        "paused-over-a-step-its-owners-redelivery-is-handed-back",
        "held",
        "The run was paused while its step's body ran: the owner's redelivery holds the step "
        "and is handed back (2 s, then a quarter of the pause's age, at most 30 s); another "
        "delivery holds nothing.",
        ("run_paused", None, 1),
        paused_probes,
    ),
]


def line(case: Case, events: list[Event], recorded: str = "run") -> dict[str, Any]:
    history = history_of(events[0].run_id, events)
    probes = case.probes(events)
    out = history.to_json()
    assert out["format"] == FORMAT
    out.update(case=case.name, recorded=recorded, why=case.why, **case.extra)
    if case.code is not None:
        out["code"] = case.code
    out["probes"] = [{"probe": p, "expect": planner.observe(history, p, case.code)} for p in probes]
    return out


def _appended(events: list[Event], kind: EventType, data: dict[str, Any], after: float) -> Event:
    """One more event after ``events``' last, as a world would number and stamp it."""
    tail = events[-1]
    cid = events[-1].correlation_id
    return Event(tail.run_id, tail.seq + 1, kind, cid, data, tail.created_at + after)


def duplicated_hook(runs: dict[str, list[Event]]) -> list[Event]:
    """The approval's log with its payload written twice under one delivery id, as a world
    that did not deduplicate it would hold it (a real run cannot write this)."""
    through = cut(runs["approval"], ("hook_received", "h1", 1))
    return [*through, _appended(through, EventType.HOOK_RECEIVED, dict(through[-1].data), 0.001)]


def stamped_after_retry(runs: dict[str, list[Event]]) -> list[Event]:
    """The retrying run's log with a stamped start after its ``step_retrying``, as a worker
    that re-stamped a retried step would write it (none does today: a retry starts bare)."""
    through = cut(runs["retrying"], ("step_retrying", "s1", 1))
    stamp = {"attempt": 2, "ownerMessageId": first_owner(through, "s1"), "lease": LEASE}
    return [*through, _appended(through, EventType.STEP_STARTED, stamp, 0.05)]


HAND = [
    (
        Case(
            "hook-payload-written-twice-by-hand",
            "approval",
            "Written by hand from the approval's log: the same payload stored twice under one "
            "delivery id. The hook takes its first payload; the step after it is planned once.",
            None,
            after_last(),
        ),
        duplicated_hook,
    ),
    (
        Case(
            "retry-then-a-stamped-start-stays-queue-owned",
            "retrying",
            "Written by hand from the retrying run's log: a stamped start after the retry. "
            "Ownership lapsed for good at the retry, so even the stamp's own message enqueues "
            "the step instead of running it as owned.",
            None,
            by_first_owner("s1", 0.05),
        ),
        stamped_after_retry,
    ),
]
"""Cases a real run cannot write: built from a recorded log, marked ``"recorded": "hand"``."""


def main(only: set[str] | None = None) -> None:
    """Record every case, or with ``only`` those cases alone, keeping every other line of the
    file as it is (the cases stay in the recorder's order)."""
    runs = asyncio.run(record())
    RECORDED.update(runs)
    cases = [(case, lambda case=case: cut(runs[case.run], case.through), "run") for case in CASES]
    cases += [(case, lambda build=build: build(runs), "hand") for case, build in HAND]
    kept: dict[str, dict[str, Any]] = {}
    if only is not None:
        kept = {raw["case"]: raw for raw in map(json.loads, OUT.read_text().splitlines())}
        unknown = only - {case.name for case, _, _ in cases}
        if unknown:
            raise SystemExit(f"no such case: {', '.join(sorted(unknown))}")
    lines = []
    for case, events, how in cases:
        if only is None or case.name in only:
            lines.append(line(case, events(), recorded=how))
        elif case.name in kept:
            lines.append(kept[case.name])
        else:
            raise SystemExit(f"case {case.name!r} is not in {OUT.name}: record it too")
    text = "\n".join(json.dumps(x) for x in lines) + "\n"
    # tracebacks name files by where this checkout is: keep only the repository's path
    OUT.write_text(text.replace(str(ROOT) + "/", ""), encoding="utf-8")
    print(f"wrote {len(lines)} histories to {OUT.relative_to(ROOT)}")


def answer_again() -> None:
    """Keep the recorded logs and probes, and write the planner's answers of today beside
    them (after a deliberate change to the planner: review the diff of the file)."""
    lines = []
    for number, text in enumerate(OUT.read_text(encoding="utf-8").splitlines(), 1):
        raw = json.loads(text)
        history = parse_history(text, f"{OUT.name}:{number}")
        for probe in raw["probes"]:
            probe["expect"] = planner.observe(history, probe["probe"], raw.get("code"))
        lines.append(json.dumps(raw))
    OUT.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"answered {len(lines)} histories again in {OUT.relative_to(ROOT)}")


def dump(runs: dict[str, list[Event]]) -> None:
    for name, events in runs.items():
        print(f"== {name}")
        for e in events:
            print(f"  {e.seq:3} {e.type!s:28} {e.correlation_id!s:12} {json.dumps(e.data)[:110]}")


if __name__ == "__main__":
    if sys.argv[1:] == ["--dump"]:
        dump(asyncio.run(record()))
    elif sys.argv[1:] == ["--answers"]:
        answer_again()
    elif sys.argv[1:2] == ["--only"] and sys.argv[2:]:
        main(set(sys.argv[2:]))
    else:
        main()
