"""The NATS queue's consumer names: one per topic and priority level, never the same for two
(topic, level) pairs, including a topic whose name ends like a level's suffix."""

from __future__ import annotations

from wayline.worlds.nats.names import consumer_name


def test_a_level_of_one_topic_never_shares_a_name_with_another_topics_consumer() -> None:
    topics = ["x", "x_p5", "qp5_x", "flow", "flow:w:a@b", "x" * 200, "step_p0"]
    levels: list[int | None] = [None, *range(10)]
    names = [consumer_name(t, level) for t in topics for level in levels]
    assert len(set(names)) == len(names)
    assert consumer_name("x", 5) != consumer_name("x_p5")


def test_the_consumer_of_the_subject_before_the_levels_keeps_its_name() -> None:
    assert consumer_name("flow") == "q_flow"
    assert consumer_name("a b").startswith("qh_")
