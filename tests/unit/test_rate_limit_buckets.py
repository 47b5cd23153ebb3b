"""``wayline.RateLimit``'s rate strings and the token bucket's arithmetic (pure: the worlds
store a ``Bucket`` per key and apply ``take`` in their own transaction or compare-and-set)."""

from __future__ import annotations

import re

import pytest

import wayline
from wayline._core.rate_limits import RESERVATION_SECONDS, Bucket, parse_rate, take
from wayline.errors import ConfigurationError


@pytest.mark.parametrize(
    ("text", "per_second"),
    [
        ("100/s", 100.0),
        ("1/sec", 1.0),
        ("30/m", 0.5),
        ("30/min", 0.5),
        ("120/minute", 2.0),
        ("1000/h", 1000 / 3600),
        ("7200/hour", 2.0),
        (" 2.5 / S ", 2.5),
    ],
)
def test_rate_strings(text: str, per_second: float) -> None:
    assert parse_rate(text) == pytest.approx(per_second)


@pytest.mark.parametrize("text", ["100", "100/d", "/s", "0/s", "-1/s", "1e3/s", "ten/s", ""])
def test_a_bad_rate_is_a_clear_error(text: str) -> None:
    with pytest.raises(ConfigurationError, match="'N/s', 'N/m'"):
        wayline.RateLimit(rate=text)


def _refused(message: str) -> pytest.RaisesExc[ConfigurationError]:
    return pytest.raises(ConfigurationError, match=re.escape(message))


def test_bad_burst_key_and_types_are_refused() -> None:
    with _refused("RateLimit.rate takes a string"):
        wayline.RateLimit(rate=100)  # type: ignore[arg-type]
    for burst in (0, -1, 1.5, True):
        with _refused("RateLimit.burst must be an int >= 1"):
            wayline.RateLimit(rate="1/s", burst=burst)  # type: ignore[arg-type]
    with _refused("RateLimit.key takes a function or a string"):
        wayline.RateLimit(rate="1/s", key=3)  # type: ignore[arg-type]
    bad: object = "1/s"
    with _refused("rate_limit= takes a wayline.RateLimit"):
        wayline.step(name="rate_limit_buckets.bad", rate_limit=bad)(lambda: None)  # type: ignore[call-overload]


def test_burst_defaults_to_a_seconds_worth_and_at_least_one() -> None:
    assert wayline.RateLimit(rate="100/s").capacity == 100
    assert wayline.RateLimit(rate="2.5/s").capacity == 2
    assert wayline.RateLimit(rate="1000/h").capacity == 1
    assert wayline.RateLimit(rate="1000/h", burst=20).capacity == 20


def test_keys_name_the_step_or_workflow_and_the_key() -> None:
    assert wayline.RateLimit(rate="1/s").key_for("step:a", [], {}) == "step:a:*"
    assert wayline.RateLimit(rate="1/s", key="eu").key_for("w", [], {}) == "w:eu"
    by_user = wayline.RateLimit(rate="1/s", key=lambda user, text: user)
    assert by_user.key_for("step:n", ["ana"], {"text": "hi"}) == "step:n:ana"


def test_a_new_key_starts_full_and_empties() -> None:
    bucket: Bucket | None = None
    for _ in range(3):
        bucket, wait = take(bucket, 100.0, 1.0, 3)
        assert wait == 0.0
    assert bucket == Bucket(0.0, 100.0)
    after, wait = take(bucket, 100.0, 1.0, 3)
    assert after is None and wait == pytest.approx(1.0)  # nothing to store: a wait


def test_tokens_refill_at_the_rate_up_to_the_burst() -> None:
    empty = Bucket(0.0, 100.0)
    assert take(empty, 100.25, 2.0, 3) == (None, pytest.approx(0.25))  # half a token
    assert take(empty, 100.5, 2.0, 3) == (Bucket(0.0, 100.5), 0.0)  # one token, taken
    assert take(empty, 1000.0, 2.0, 3) == (Bucket(2.0, 1000.0), 0.0)  # capped at the burst


def test_a_waiter_reserves_the_next_free_token_and_takes_it_when_due() -> None:
    """Waiters come back one at a time, each at its own token's time, instead of all at the
    next token (a herd of which one wins)."""
    bucket, wait = take(None, 100.0, 2.0, 1, "a")
    assert wait == 0.0
    bucket, wait = take(bucket, 100.0, 2.0, 1, "b")
    assert wait == pytest.approx(0.5) and bucket is not None
    assert bucket.reserved == {"b": pytest.approx(100.5)} and bucket.tokens == -1.0
    bucket, wait = take(bucket, 100.0, 2.0, 1, "c")  # behind b
    assert wait == pytest.approx(1.0) and bucket is not None
    assert take(bucket, 100.25, 2.0, 1, "b") == (None, pytest.approx(0.25))  # not yet: no write
    bucket, wait = take(bucket, 100.5, 2.0, 1, "b")
    assert wait == 0.0 and bucket is not None and set(bucket.reserved) == {"c"}
    bucket, wait = take(bucket, 100.5, 2.0, 1, "d")  # c's token is not d's
    assert wait == pytest.approx(1.0)
    bucket, wait = take(bucket, 101.0, 2.0, 1, "c")
    assert wait == 0.0 and bucket is not None and set(bucket.reserved) == {"d"}


def test_a_reservation_nobody_takes_lapses() -> None:
    """A waiter that never comes back (its run cancelled) loses its token a minute after it
    was due, and the bucket forgets it."""
    bucket, _ = take(Bucket(0.0, 100.0), 100.0, 1.0, 1, "gone")
    assert bucket is not None and "gone" in bucket.reserved
    later, wait = take(bucket, 100.0 + 1 + RESERVATION_SECONDS + 1, 1.0, 1, "next")
    assert wait == 0.0 and later is not None and later.reserved == {}


def test_without_a_holder_nothing_is_reserved() -> None:
    assert take(Bucket(0.0, 100.0), 100.0, 1.0, 1) == (None, pytest.approx(1.0))


def test_a_clock_behind_the_buckets_refills_nothing() -> None:
    """Another worker's clock a little behind: no tokens appear, and the bucket keeps its
    time, so the refill is not counted twice once clocks agree again."""
    assert take(Bucket(0.0, 100.0), 99.0, 1.0, 1) == (None, pytest.approx(1.0))
    assert take(Bucket(1.5, 100.0), 99.0, 1.0, 3) == (Bucket(0.5, 100.0), 0.0)
