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

from ..._core.ordering import DEFAULT_PRIORITY, MAX_PRIORITY, MIN_PRIORITY
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


FAIR_LANES = 8
"""How many lanes a priority level has for work with a fairness key: a key's work goes to a
lane of its own while one is free, from the lane its hash picks (:func:`lane_of`) on
(``lane_choice.py``), and a receive gives the lanes of a level fair turns. Past eight keys with
queued work at one level, keys share lanes (and are first in, first out between them); more
lanes would cost more consumers, a longer scan (``levels.py``) and more direct gets for a
sender's choice."""

_LEGACY = "t"


def lane_of(fairness_key: str) -> int:
    """The home lane of a fairness key at a level (the same in every process): its work goes
    there unless another key's work holds it (``lane_choice.choose``)."""
    return int.from_bytes(hashlib.sha256(fairness_key.encode()).digest()[:4], "big") % FAIR_LANES


def kind_of(priority: int, fairness_key: str) -> str:
    """The subject token after ``q`` of a ready message (its *kind*): ``t`` for the default
    priority without a fairness key (the one subject every message used before the levels, so
    a worker of a release before them serves it), ``p<level>`` for another priority without a
    key, and ``p<level>f<lane>`` for work with a key (its home lane, ``lane_of``; the queue's
    sender picks a free lane instead when another key's work holds it, ``lane_choice``)."""
    if fairness_key:
        return f"p{priority}f{lane_of(fairness_key)}"
    return _LEGACY if priority == DEFAULT_PRIORITY else f"p{priority}"


def kind_level(kind: str) -> int:
    """The priority level a kind's messages are served at (``t``: the default); ValueError for
    a token that is no ready message's kind (a schedule's ``s``)."""
    if kind == _LEGACY:
        return DEFAULT_PRIORITY
    if len(kind) >= 2 and kind[0] == "p" and kind[1].isdigit():
        if len(kind) == 2:
            return int(kind[1])
        lane = kind[3:]
        if kind[2] == "f" and lane.isdigit() and int(lane) < FAIR_LANES and str(int(lane)) == lane:
            return int(kind[1])
    raise ValueError(f"not a ready message's subject token: {kind!r}")


def kind_lane(kind: str) -> str:
    """The fair lane a kind is within its level: ``""`` for work without a fairness key (one
    lane, as SQLite gives every message without a key the key ``""``), ``f<lane>`` else."""
    return kind[2:] if len(kind) > 2 else ""


ALL_KINDS: tuple[str, ...] = (
    _LEGACY,
    *(f"p{level}" for level in range(MIN_PRIORITY, MAX_PRIORITY + 1)),
    *(
        f"p{level}f{lane}"
        for level in range(MIN_PRIORITY, MAX_PRIORITY + 1)
        for lane in range(FAIR_LANES)
    ),
)
"""Every subject a topic's ready messages may live on: the one before the levels, a subject per
other priority (``p5`` too: a release between the levels and the default's return to ``t``
sent the default there) and the fair lanes of each level."""

PLAIN_KINDS = ALL_KINDS[: 1 + MAX_PRIORITY - MIN_PRIORITY + 1]
"""The kinds of work without a fairness key."""


def consumer_name(topic: str, kind: str = _LEGACY) -> str:
    """The pull consumer of a topic's messages of one kind (``t``: of the subject every level
    shared before the levels, which holds the default priority's work without a key). Another
    kind's name starts ``q<kind>_`` (``qph<level>…_`` for a hashed topic), which no name of the
    subject before the levels (``q_``, ``qh_``) starts with: a level suffix after the topic
    would make level 5 of topic ``x`` and the old consumer of a topic ``x_p5`` one name."""
    plain = bool(_PLAIN.match(topic)) and len(topic) <= _MAX_PLAIN
    rest = topic if plain else hashlib.sha256(topic.encode()).hexdigest()[:40]
    if kind == _LEGACY:
        return ("q_" if plain else "qh_") + rest
    return f"q{kind}_{rest}" if plain else f"qph{kind[1:]}_{rest}"


MAX_PARTITIONS = 64
"""The most partitions a world may have (``?partitions=``): each is an events stream and a
queue stream of its own (two Raft groups on a cluster) and a receive asks each in turn, so a
count far above the nodes' cores buys nothing and costs a pull per idle partition."""


def partition_of(run_id: str, partitions: int) -> int:
    """The partition a run's events and queue messages live in: the same in every process and
    release (sha256, never Python's salted ``hash()``); 0 when the world has one."""
    if partitions <= 1:
        return 0
    return int.from_bytes(hashlib.sha256(run_id.encode()).digest()[:8], "big") % partitions


@dataclass(frozen=True, slots=True)
class Names:
    prefix: str
    part: int = 0
    """The partition these names are of (``partition_of``). Partition 0 has the names every
    world had before partitions, so a world of one partition is today's world exactly;
    partition ``i > 0`` has its own events and queue streams and subjects (``ev<i>``,
    ``q<i>``, ``evts<i>``), which no other stream of the prefix overlaps."""

    def __post_init__(self) -> None:
        if not _PLAIN.match(self.prefix) or len(self.prefix) > 64:
            raise ConfigurationError(
                f"NATS prefix {self.prefix!r} must match [A-Za-z0-9_-]+ (at most 64 characters)",
                prefix=self.prefix,
            )

    def partition(self, part: int) -> Names:
        """The names of partition ``part`` of this prefix."""
        return Names(self.prefix, part)

    @property
    def _tag(self) -> str:
        return str(self.part) if self.part else ""

    @property
    def id_tag(self) -> str:
        """Put before a queue message id made of a stream sequence (``queue._message_id``):
        sequences of two partitions' streams coincide, their message ids must not."""
        return f"p{self.part}-" if self.part else ""

    # event log
    @property
    def events_stream(self) -> str:
        return f"{self.prefix}_events" + (f"_p{self.part}" if self.part else "")

    @property
    def events_wildcard(self) -> str:
        return f"{self.prefix}.ev{self._tag}.*"

    def run_subject(self, run_id: str) -> str:
        return self.token_subject(subject_token(run_id))

    def token_subject(self, token: str) -> str:
        """The events subject of the run whose subject token is ``token``."""
        return f"{self.prefix}.ev{self._tag}.{token}"

    @property
    def stamps_wildcard(self) -> str:
        """Where the events stream republishes each stored message's headers (its timestamp)."""
        return f"{self.prefix}.evts{self._tag}.*"

    @property
    def stamps_dest(self) -> str:
        return f"{self.prefix}.evts{self._tag}.{{{{wildcard(1)}}}}"

    @property
    def meta_bucket(self) -> str:
        """What a world records about itself: its partitions (``provision.check_partitions``)."""
        return f"{self.prefix}_meta"

    @property
    def hooks_bucket(self) -> str:
        return f"{self.prefix}_hooks"

    # queue
    @property
    def queue_stream(self) -> str:
        return f"{self.prefix}_queue" + (f"_p{self.part}" if self.part else "")

    @property
    def _q(self) -> str:
        return f"{self.prefix}.q{self._tag}"

    @property
    def queue_root(self) -> str:
        """What every subject of this partition's queue stream starts with (``<prefix>.q`` in
        partition 0, ``<prefix>.q<i>`` in partition i): a subject's second token names the
        partition, so code that takes a queue subject apart compares against this."""
        return self._q

    @property
    def queue_wildcard(self) -> str:
        return f"{self._q}.>"

    @property
    def schedules_prefix(self) -> str:
        """What every schedule's subject starts with."""
        return f"{self._q}.s."

    def target_filter(self, topic: str, kind: str = _LEGACY) -> str:
        """A topic's ready messages of one kind (``kind_of``); ``t``: the single subject of
        every level that a world provisioned before the levels used."""
        return f"{self._q}.{kind}.{subject_token(topic)}.>"

    def target_subject(self, topic: str, mid: str, kind: str = _LEGACY) -> str:
        return f"{self._q}.{kind}.{subject_token(topic)}.{mid}"

    def topic_wildcard(self, topic: str) -> str:
        """Every message and schedule of one topic, of any level."""
        return f"{self._q}.*.{subject_token(topic)}.*"

    def schedule_filter(self, topic: str) -> str:
        """Every pending schedule of one topic."""
        return f"{self._q}.s.{subject_token(topic)}.>"

    def schedule_subject(self, topic: str, mid: str) -> str:
        return f"{self._q}.s.{subject_token(topic)}.{mid}"

    def key_filter(self, token: str) -> str:
        """Every message and schedule, on any topic, stored under one idempotency key."""
        return f"{self._q}.*.*.{token}"

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
