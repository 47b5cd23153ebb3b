"""Short sleeps woken in the process that armed them (docs/durability.md, "Short sleeps").

A sleep is woken by a delayed flow message (``WaitDue``) armed in the decision batch that
created it. On NATS such a message is a message schedule, and nats-server fires none sooner
than 250 ms after it is stored (its scheduler's timer has that floor), so a 1 ms sleep took a
quarter of a second there, and a run that slept after each step advanced 4 steps a second.

So a delivery that leaves its run waiting on a sleep or a timeout due within
``prompt_wake_seconds`` keeps the run: it waits in this process until it is due (a timer of the
event loop: no polling), reads what reached the log meanwhile (a pause, a cancel request, a
payload) and drives the run on, under the same delivery, as the wake would have. The delayed
message stays armed, so nothing is less durable than before:

- If this worker dies before the wake is written, the delayed message wakes the run when it
  is due, as it always did; if it came first and was taken for a duplicate, the delivery held
  here comes back after its visibility and wakes the run.
- A wait's completion is written once: ``wait_completed`` is an entity of the log, and the
  world refuses a second one (``RunSession.append_inputs``).
- Once the wait's completion is written, the delayed message is withdrawn
  (``WorkQueue.cancel_delayed``, by the id its enqueue returned here): on NATS the schedule
  is deleted before it fires, on SQLite its row before a claim takes it, so it costs one
  request instead of a delivery, its ack and, on another worker, a read of the run. Only a
  wait's own message is withdrawn (one a wait, under the wait's key), and only after its
  completion is stored: a cancel that fails, comes too late or is cut off by a crash leaves
  the message to come, and it is handled as below.
- The delayed message, when it still comes, finds the wait woken. A process that woke the
  wait itself remembers so (``_woken``), and acknowledges that message at once, without
  reading the run or driving it a second time. The wait is remembered from before the wait
  in process, since on a world that fires delayed messages on time (SQLite) the message
  comes as the timer does, and the delivery held here drives the run on after the wait
  whatever happens. Elsewhere (another worker, or this one after a restart) the message is
  handled as any late wake: the run is read, its wait is found completed, and nothing new
  is written.
- A delivery that took a wait to wake here but ends with the wait still pending (the worker
  closes, or the run is handed off, right after the wait in process; a pause asked in the
  wait and read after it; an error) forgets it took it (``handed_back``): the wait's delayed
  message (or the one the next delivery re-arms under the wait's key) is then the run's wake
  again wherever it comes, and is not acknowledged unread. Else the worker that drives the
  run next, whose clock may read the wait not yet due and that may have no slot to spare for
  a wait in process, would leave the wake to that message, and this process would
  acknowledge it as a duplicate: nothing would wake the run.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence

from .._core.ids import MessageId
from .._core.messages import WakeReason
from .._core.planning import Send
from .._core.replay import Replay

REMEMBERED = 4096
"""Wait keys remembered as woken here, oldest forgotten first: a forgotten key only costs its
delayed message a read of the run. A wait is remembered from the moment its prompt wake is
decided until its delayed message comes (most often within a second)."""


class PromptWakes:
    """The waits a worker wakes itself, and how often that happened."""

    def __init__(self, horizon: float) -> None:
        self.horizon = horizon
        self._woken: OrderedDict[str, None] = OrderedDict()
        self.prompt = 0
        """Wakes applied in this process, not by their delayed message."""
        self.duplicates = 0
        """Delayed messages acknowledged at once, their wait woken here already."""
        self._armed: OrderedDict[str, list[MessageId]] = OrderedDict()
        """The delayed messages this process sent for waits due within the horizon, by wait:
        what ``retire`` hands back to withdraw once the wait is woken here."""
        self.retired = 0
        """Delayed messages withdrawn before they came, their wait woken here."""

    def armed(self, run_id: str, sends: Sequence[Send], ids: Sequence[MessageId]) -> None:
        """Remember the ids of the wait messages among ``sends`` (enqueued as ``ids``) that
        are due within the horizon: only such a wait is woken here."""
        if self.horizon <= 0:
            return
        for send, message_id in zip(sends, ids, strict=True):
            wait_id = send.payload.get("waitId")
            if (
                send.payload.get("reason") != WakeReason.WAIT
                or not isinstance(wait_id, str)
                or send.delay > self.horizon
            ):
                continue
            ids_of = self._armed.setdefault(_key(run_id, wait_id), [])
            if message_id not in ids_of:  # a re-send under the key answers the same id
                ids_of.append(message_id)
        while len(self._armed) > REMEMBERED:
            self._armed.popitem(last=False)

    def retire(self, run_id: str, completed: Sequence[str]) -> list[MessageId]:
        """The delayed messages to withdraw now that the waits ``completed`` of ``run_id``
        are written: those of waits this process took to wake (another delivery's wake
        needs its own message)."""
        out: list[MessageId] = []
        for wait_id in completed:
            key = _key(run_id, wait_id)
            if key in self._woken:
                out += self._armed.pop(key, [])
        return out

    def handed_back(self, replay: Replay) -> None:
        """A delivery of ``replay``'s run ends (or stops driving it: paused, handed back) with
        these waits still pending: whoever took them to wake, their delayed messages are the
        run's wakes again, never duplicates. Forgetting a wait another delivery here still
        waits for only lets its message drive the run once more."""
        run_id = replay.run_id
        for wait in replay.pending_waits():
            self._woken.pop(_key(run_id, wait.cid), None)

    def due_in(self, replay: Replay, now: float) -> float | None:
        """How long until the run's first pending wait (a sleep, a hook's timeout, a child's
        deadline) is due, when that is within the horizon; else None."""
        if self.horizon <= 0:
            return None
        waits = replay.pending_waits()
        if not waits:
            return None
        delay = min(w.resume_at for w in waits) - now
        return max(0.0, delay) if delay <= self.horizon else None

    def woke(self, replay: Replay, at: float) -> None:
        """Remember the waits of ``replay`` due by ``at``: this process wakes them (their
        delayed messages are duplicates from now on, even one that comes before ``at``)."""
        for wait in replay.pending_waits():
            if wait.resume_at <= at:
                self._woken[_key(replay.run_id, wait.cid)] = None
        while len(self._woken) > REMEMBERED:
            self._woken.popitem(last=False)
        self.prompt += 1

    def taken(self, replay: Replay) -> bool:
        """Whether a pending wait of ``replay`` is one this process took to wake: its delayed
        message may have been acknowledged unread already, so nothing but this process will
        wake it, and the wait in process must not be declined (a clock read a little behind
        the loop's after the sleep, or the last slot taken meanwhile, left such a wait
        pending with its delivery acknowledged: a run that never woke)."""
        run_id = replay.run_id
        return any(_key(run_id, wait.cid) in self._woken for wait in replay.pending_waits())

    def duplicate(self, run_id: str, wait_id: object) -> bool:
        """Whether a delayed message for ``wait_id`` of ``run_id`` comes for a wait this
        process woke. The key is kept (until the oldest are forgotten): ``taken`` asks for it
        while the wait is pending, and a message redelivered is a duplicate as well."""
        if not isinstance(wait_id, str) or _key(run_id, wait_id) not in self._woken:
            return False
        self.duplicates += 1
        return True


def _key(run_id: str, wait_id: str) -> str:
    return f"{run_id}:{wait_id}"
