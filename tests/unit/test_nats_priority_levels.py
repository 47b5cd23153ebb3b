"""What one process records of a topic's priority levels on NATS (``worlds/nats/levels.py``):
a level (a kind: ``t`` for the subject before the levels, ``p<level>`` or ``p<level>f<lane>``)
leaves the record only when found empty with nothing heard on it meanwhile, and never while a
schedule of it may be pending."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from wayline.worlds.nats.levels import Levels


@dataclass
class Heard:
    """A publish as the subscription hands it over: its subject and headers."""

    subject: str
    headers: dict[str, Any] = field(default_factory=dict)


def test_a_publish_names_its_level_and_a_schedule_its_target_level() -> None:
    levels = Levels()
    levels.on_msg(Heard("w.q.p3.flow.abc"))
    levels.on_msg(Heard("w.q.s.flow.def", {"Nats-Schedule-Target": "w.q.p0.flow.def"}))
    levels.on_msg(Heard("w.q.t.flow.ghi"))  # a worker of the release before the levels
    levels.on_msg(Heard("w.q.zz.flow.junk"))  # bytes no world writes: nothing learnt
    assert levels.stored == {"p3", "p0", "t"}
    assert levels.scheduled == {"p0"}
    assert levels.count == 4


def test_a_level_found_empty_leaves_unless_heard_of_meanwhile_or_scheduled() -> None:
    levels = Levels()
    levels.on_msg(Heard("w.q.p3.flow.a"))
    levels.on_msg(Heard("w.q.p4.flow.b"))
    levels.on_msg(Heard("w.q.s.flow.c", {"Nats-Schedule-Target": "w.q.p1.flow.c"}))
    asked = {level: levels.heard(level) for level in ("p1", "p3", "p4")}
    levels.on_msg(Heard("w.q.p4.flow.d"))  # published while the question was out
    for level in ("p1", "p3", "p4"):
        levels.found_empty(level, asked[level])
    assert levels.stored == {"p1", "p4"}


def test_a_scan_keeps_what_it_found_and_the_levels_of_pending_schedules() -> None:
    levels = Levels()
    levels.on_msg(Heard("w.q.s.flow.c", {"Nats-Schedule-Target": "w.q.p1.flow.c"}))
    levels.on_msg(Heard("w.q.p6.flow.x"))
    heard = {level: levels.heard(level) for level in ("t", *(f"p{n}" for n in range(10)))}
    levels.scanned({"p2"}, heard, set())  # the schedule fired and its message was taken
    assert levels.stored == {"p2"}
    assert levels.scheduled == set()
    levels.scanned(set(), heard, {"p7"})  # a schedule stored before this process listened
    assert levels.stored == {"p7"} and levels.scheduled == {"p7"}
