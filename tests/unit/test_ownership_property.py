"""Property test (Hypothesis): random interleavings of starts, wakes, retries and crashes.

A discrete-event model of one process running one inline step, driven by the real
``dispatch.decide``: a queue with lifetime idempotency keys and stable message ids, in-process
single-flight, crashes that lose every in-flight execution and redeliver held messages. Checked:
never two concurrent executions of the step in one process; every run ends once the adversary
stops; and with no crash, no failure and a body shorter than the lease, wakes never cause a
second execution (the #2780 property)."""

from __future__ import annotations

import heapq
import itertools
from dataclasses import dataclass, field

from hypothesis import given, settings
from hypothesis import strategies as st

from wayline._core.dispatch import Action, StepState, decide, step_dispatch_key

LEASE = 10.0
T0 = 1000.0  # model clock start (a zero stamp reads as unusable, by design)
RUN, CID = "wf_model", "s1"


@dataclass
class Msg:
    id: str
    topic: str
    key: str | None
    backstop_key: str | None = None


@dataclass
class Model:
    ownership: bool = True
    durations: list[float] = field(default_factory=list)
    fail_first: bool = False
    now: float = T0
    created: bool = False
    terminal: bool = False
    owner: str | None = None
    started_at: float | None = None
    retrying: bool = False
    starts: int = 0
    executions: int = 0
    running: int = 0
    max_running: int = 0
    in_flight: dict[str, tuple[Msg, bool]] = field(default_factory=dict)  # held, claims sf?
    sf_busy: bool = False
    sf_losers: list[Msg] = field(default_factory=list)
    keys: dict[str, str] = field(default_factory=dict)
    generation: int = 0
    _ids: itertools.count = field(default_factory=lambda: itertools.count(1))
    _seq: itertools.count = field(default_factory=itertools.count)
    agenda: list[tuple[float, int, str, object]] = field(default_factory=list)

    def at(self, t: float, kind: str, obj: object) -> None:
        heapq.heappush(self.agenda, (t, next(self._seq), kind, obj))

    def enqueue(
        self, topic: str, key: str | None, delay: float = 0.0, backstop: str | None = None
    ) -> None:
        if key is not None and key in self.keys:
            return  # lifetime dedupe: stored or in flight
        msg = Msg(f"m{next(self._ids)}", topic, key, backstop)
        if key is not None:
            self.keys[key] = msg.id
        self.at(self.now + delay, "deliver", msg)

    def ack(self, msg: Msg) -> None:
        self.in_flight.pop(msg.id, None)
        if msg.key is not None and self.keys.get(msg.key) == msg.id:
            del self.keys[msg.key]

    def start_body(self, msg: Msg, *, owner: str | None, claim_sf: bool) -> None:
        self.starts += 1
        self.owner, self.started_at = owner, self.now
        if claim_sf and self.sf_busy:
            self.sf_losers.append(msg)  # awaits the winner, then acks without executing
            return
        if claim_sf:
            self.sf_busy = True
        self.executions += 1
        self.running += 1
        self.max_running = max(self.max_running, self.running)
        duration = self.durations[(self.executions - 1) % len(self.durations)]
        fails = self.fail_first and self.executions == 1
        self.at(self.now + duration, "finish", (msg, claim_sf, fails, self.generation))

    def deliver(self, msg: Msg) -> None:
        self.in_flight[msg.id] = (msg, False)
        if self.terminal:
            return self.ack(msg)
        if msg.topic == "step":
            return self.start_body(msg, owner=None, claim_sf=True)
        if not self.created:  # the start message: lazy inline create + stamped start
            self.created = True
            return self.start_body(msg, owner=msg.id, claim_sf=self.ownership)
        d = decide(
            StepState(self.owner, self.started_at, self.retrying, self.terminal),
            run_id=RUN,
            correlation_id=CID,
            my_message_id=msg.id,
            now=self.now,
            lease=LEASE,
            ownership_enabled=self.ownership,
            arriving_backstop_key=msg.backstop_key,
        )
        if d.action is Action.EXECUTE_OWNED:
            return self.start_body(msg, owner=msg.id, claim_sf=True)
        if d.action is Action.ARM_BACKSTOP:
            self.enqueue("flow", d.idempotency_key, d.delay_seconds, backstop=d.idempotency_key)
        else:
            self.enqueue("step", d.idempotency_key)
        self.ack(msg)

    def finish(self, msg: Msg, claimed: bool, fails: bool, generation: int) -> None:
        if generation != self.generation:
            return  # that process died: the execution's outcome was never written
        self.running -= 1
        if claimed:
            self.sf_busy = False
        if not self.terminal:
            if fails and not self.retrying:
                self.retrying, self.owner = True, None
                if msg.topic == "step":  # world.retry: the same message, later
                    self.in_flight.pop(msg.id, None)
                    self.at(self.now + 1.0, "deliver", msg)
                    self._release_losers()
                    return
                self.enqueue("step", step_dispatch_key(RUN, CID), 1.0)  # retry handoff
            else:
                self.terminal = True
        self._release_losers()
        self.ack(msg)

    def _release_losers(self) -> None:
        losers, self.sf_losers = self.sf_losers, []
        for loser in losers:
            if loser.topic == "step" and not self.terminal:
                # handler.handle_step: the loser's message becomes the retry (its key absorbed
                # the winner's handoff), redelivered when due
                self.in_flight.pop(loser.id, None)
                self.at(self.now + 1.0, "deliver", loser)
            else:
                self.ack(loser)

    def crash(self) -> None:
        self.generation += 1
        self.running, self.sf_busy, self.sf_losers = 0, False, []
        for msg, _ in list(self.in_flight.values()):
            self.at(self.now + 0.5, "deliver", msg)  # redelivered: same id, attempt + 1
        self.in_flight.clear()

    def run(self, until: float = T0 + 10_000.0) -> None:
        steps = 0
        while self.agenda and steps < 10_000:
            t, _, kind, obj = heapq.heappop(self.agenda)
            if t > until:
                break
            self.now, steps = max(self.now, t), steps + 1
            if kind == "deliver":
                assert isinstance(obj, Msg)
                self.deliver(obj)
            elif kind == "finish":
                self.finish(*obj)  # type: ignore[misc]
            elif kind == "wake":
                self.enqueue("flow", None)
            elif kind == "crash":
                self.crash()


ops = st.lists(st.tuples(st.sampled_from(["wake", "crash"]), st.floats(0.0, 30.0)), max_size=8)


@settings(max_examples=300, deadline=None)
@given(
    ops=ops,
    durations=st.lists(st.floats(0.1, 25.0), min_size=1, max_size=4),
    fail_first=st.booleans(),
)
def test_never_two_concurrent_executions_and_every_run_ends(
    ops: list[tuple[str, float]], durations: list[float], fail_first: bool
) -> None:
    model = Model(durations=durations, fail_first=fail_first)
    model.enqueue("flow", f"{RUN}:start")
    for kind, t in ops:
        model.at(t, kind, None)
    model.run()
    assert model.max_running <= 1
    assert model.terminal, "the run wedged"
    crashes = sum(1 for kind, _ in ops if kind == "crash")
    expiries = sum(1 for d in durations if d >= LEASE)
    assert model.executions <= 1 + crashes + int(fail_first) + expiries * (1 + crashes)


@settings(max_examples=200, deadline=None)
@given(wakes=st.lists(st.floats(0.0, 8.0), max_size=6), duration=st.floats(0.1, 9.0))
def test_wakes_never_duplicate_a_live_owner(wakes: list[float], duration: float) -> None:
    model = Model(durations=[duration])
    model.enqueue("flow", f"{RUN}:start")
    for t in wakes:
        model.at(T0 + t, "wake", None)
    model.run()
    assert model.terminal and model.executions == 1


def test_the_kill_switch_model_duplicates() -> None:
    """The model can fail: without ownership a wake mid-body runs it again (#2780)."""
    model = Model(ownership=False, durations=[5.0])
    model.enqueue("flow", f"{RUN}:start")
    model.at(T0 + 1.0, "wake", None)
    model.run()
    assert model.terminal and model.executions == 2
