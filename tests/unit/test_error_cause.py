"""``ErrorCause.from_recorded`` reads a recorded error of this release as it was written and
one of an older release by its appended notes, and no recorded bytes make it raise."""

from __future__ import annotations

from wayline import ErrorCause


def test_a_users_message_that_ends_like_an_old_note_is_kept_whole() -> None:
    said = "ValueError from the provider (gave up after 3 attempts)"
    cause = ErrorCause.from_recorded(
        {
            "code": "USER_ERROR",
            "message": said,
            "attempt": 1,
            "attempts": 1,
            "notRetriedBecause": "ValueError is non-retryable",
        }
    )
    assert cause.message == said
    assert (cause.attempt, cause.attempts) == (1, 1)
    assert cause.not_retried_because == "ValueError is non-retryable"


def test_an_older_records_appended_notes_become_fields() -> None:
    cause = ErrorCause.from_recorded(
        {"code": "USER_ERROR", "message": "card declined (gave up after 3 attempts)"}
    )
    assert cause.message == "card declined"
    assert (cause.attempt, cause.not_retried_because) == (3, "retries exhausted")


def test_a_note_with_a_number_too_long_to_be_an_attempt_is_left_in_the_message() -> None:
    said = "x (gave up after " + "9" * 5000 + " attempts)"
    cause = ErrorCause.from_recorded({"code": "USER_ERROR", "message": said})
    assert cause.message == said and cause.attempt is None
