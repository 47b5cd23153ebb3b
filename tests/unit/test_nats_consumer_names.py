"""The NATS queue's consumer names: one per topic and subject kind (the subject before the
levels, a level, a level's fair lane), never the same for two (topic, kind) pairs, including a
topic whose name ends like a level's or a lane's suffix."""

from __future__ import annotations

from wayline.worlds.nats.names import ALL_KINDS, consumer_name, kind_level, kind_of


def test_a_kind_of_one_topic_never_shares_a_name_with_another_topics_consumer() -> None:
    topics = ["x", "x_p5", "qp5_x", "p5f3_x", "f3_x", "flow", "flow:w:a@b", "x" * 200, "step_p0"]
    names = [consumer_name(t, kind) for t in topics for kind in ALL_KINDS]
    assert len(set(names)) == len(names)
    assert consumer_name("x", "p5") != consumer_name("x_p5")


def test_the_consumer_of_the_subject_before_the_levels_keeps_its_name() -> None:
    assert consumer_name("flow") == "q_flow"
    assert consumer_name("a b").startswith("qh_")


def test_every_kind_names_its_level_and_the_default_without_a_key_is_the_old_subject() -> None:
    assert kind_of(5, "") == "t"
    assert kind_of(3, "") == "p3"
    assert [kind_level(k) for k in ALL_KINDS].count(5) == 1 + 1 + 8
    assert {kind_of(p, key) for p in range(10) for key in ("", "a", "b", "c")} <= set(ALL_KINDS)
    for bad in ("s", "p", "p5f", "p5f8", "p5f01", "pxf1", "q5"):
        try:
            kind_level(bad)
        except ValueError:
            continue
        raise AssertionError(bad)
