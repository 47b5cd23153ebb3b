"""Names of everything the NATS world creates: streams, subjects, consumers, buckets, keys.

A prefix namespaces one deployment, so two prefixes share a server without seeing each other.
Run ids, topics, hook tokens and idempotency keys are user strings; they are used as subject
tokens or KV keys as they are when they are plain, and encoded (marked by a leading ``=``)
otherwise, so no two distinct strings map to one name.
"""

from __future__ import annotations

import base64
import hashlib
import re
from dataclasses import dataclass

from ...errors import ConfigurationError

_PLAIN = re.compile(r"^[A-Za-z0-9_-]+$")
_MAX_PLAIN = 120


def _b64(text: str) -> str:
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


def subject_token(value: str) -> str:
    """One subject token (no dots, wildcards or spaces) that identifies ``value``."""
    if _PLAIN.match(value) and len(value) <= _MAX_PLAIN:
        return value
    if len(value) <= _MAX_PLAIN:
        return "=" + _b64(value)
    return "=h" + hashlib.sha256(value.encode()).hexdigest()


def token_value(token: str) -> str | None:
    """The string a :func:`subject_token` names, or None for a hashed one (too long to keep)."""
    if not token.startswith("="):
        return token
    if token.startswith("=h"):
        return None
    try:
        return base64.urlsafe_b64decode(token[1:] + "=" * (-len(token[1:]) % 4)).decode()
    except (ValueError, UnicodeDecodeError):
        return None


def kv_key(value: str) -> str:
    """A KV key (``[-/_=.a-zA-Z0-9]+``) that identifies ``value``."""
    return "k" + subject_token(value)


def key_token(key: str) -> str:
    """The subject token of an idempotency key's messages: never a uuid hex (an unkeyed
    message's token), one token whatever the key."""
    return "k" + hashlib.sha256(key.encode()).hexdigest()


def consumer_name(topic: str, level: int | None = None) -> str:
    """The pull consumer of a topic's messages of one priority level (``None``: of the
    subject every level shared before the levels, which holds the default priority's work).
    A level's name starts ``qp<level>_`` (``qph<level>_`` for a hashed topic), which no name
    of the subject before the levels (``q_``, ``qh_``) starts with: a level suffix after the
    topic would make level 5 of topic ``x`` and the old consumer of a topic ``x_p5`` one name."""
    plain = bool(_PLAIN.match(topic)) and len(topic) <= _MAX_PLAIN
    rest = topic if plain else hashlib.sha256(topic.encode()).hexdigest()[:40]
    if level is None:
        return ("q_" if plain else "qh_") + rest
    return f"qp{level}_{rest}" if plain else f"qph{level}_{rest}"


def level_kind(level: int | None) -> str:
    """The subject token after ``q`` of a message of one priority level: ``p0`` to ``p9``, or
    ``t`` for the one subject that served every level before the levels."""
    return "t" if level is None else f"p{level}"


def kind_level(kind: str) -> int | None:
    """The level a :func:`level_kind` token names (``None`` for ``t``); ValueError for any
    other token (a schedule's ``s``)."""
    if kind == "t":
        return None
    if len(kind) == 2 and kind[0] == "p" and kind[1].isdigit():
        return int(kind[1])
    raise ValueError(f"not a ready message's subject token: {kind!r}")


@dataclass(frozen=True, slots=True)
class Names:
    prefix: str

    def __post_init__(self) -> None:
        if not _PLAIN.match(self.prefix) or len(self.prefix) > 64:
            raise ConfigurationError(
                f"NATS prefix {self.prefix!r} must match [A-Za-z0-9_-]+ (at most 64 characters)",
                prefix=self.prefix,
            )

    # event log
    @property
    def events_stream(self) -> str:
        return f"{self.prefix}_events"

    @property
    def events_wildcard(self) -> str:
        return f"{self.prefix}.ev.*"

    def run_subject(self, run_id: str) -> str:
        return f"{self.prefix}.ev.{subject_token(run_id)}"

    @property
    def stamps_wildcard(self) -> str:
        """Where the events stream republishes each stored message's headers (its timestamp)."""
        return f"{self.prefix}.evts.*"

    @property
    def stamps_dest(self) -> str:
        return f"{self.prefix}.evts.{{{{wildcard(1)}}}}"

    @property
    def hooks_bucket(self) -> str:
        return f"{self.prefix}_hooks"

    # queue
    @property
    def queue_stream(self) -> str:
        return f"{self.prefix}_queue"

    @property
    def queue_wildcard(self) -> str:
        return f"{self.prefix}.q.>"

    def target_filter(self, topic: str, level: int | None = None) -> str:
        """A topic's ready messages of one priority level; ``None``: the single subject of
        every level that a world provisioned before the levels used (``q.t``)."""
        return f"{self.prefix}.q.{level_kind(level)}.{subject_token(topic)}.>"

    def target_subject(self, topic: str, mid: str, level: int | None = None) -> str:
        return f"{self.prefix}.q.{level_kind(level)}.{subject_token(topic)}.{mid}"

    def topic_wildcard(self, topic: str) -> str:
        """Every message and schedule of one topic, of any level."""
        return f"{self.prefix}.q.*.{subject_token(topic)}.*"

    def schedule_filter(self, topic: str) -> str:
        """Every pending schedule of one topic."""
        return f"{self.prefix}.q.s.{subject_token(topic)}.>"

    def schedule_subject(self, topic: str, mid: str) -> str:
        return f"{self.prefix}.q.s.{subject_token(topic)}.{mid}"

    def key_filter(self, token: str) -> str:
        """Every message and schedule, on any topic, stored under one idempotency key."""
        return f"{self.prefix}.q.*.*.{token}"

    @property
    def idem_bucket(self) -> str:
        return f"{self.prefix}_idem"

    @property
    def served_bucket(self) -> str:
        return f"{self.prefix}_served"

    @property
    def dlq_stream(self) -> str:
        return f"{self.prefix}_dlq"

    @property
    def dlq_subject(self) -> str:
        return f"{self.prefix}.dlq"

    # archive
    @property
    def archive_stream(self) -> str:
        return f"{self.prefix}_archive"

    @property
    def archive_wildcard(self) -> str:
        return f"{self.prefix}.ar.*"

    def archive_subject(self, run_id: str) -> str:
        return f"{self.prefix}.ar.{subject_token(run_id)}"
