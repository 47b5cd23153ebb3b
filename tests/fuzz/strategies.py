"""Random and structured garbage for the stores a world reads.

``cases(strategy, n)`` draws ``n`` values with Hypothesis's generator (no shrinking: each case
is applied to a live system, and a failure reports the bytes themselves)."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from wayline._core.events import EventType

_JSON: st.SearchStrategy[Any] = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda kids: (
        st.lists(kids, max_size=3) | st.dictionaries(st.text(max_size=4), kids, max_size=3)
    ),
    max_leaves=8,
)
_TYPES = st.sampled_from([t.value for t in EventType] + ["", "nope", "run_created "])


def _dumps(value: Any) -> bytes:
    return json.dumps(value).encode()


def raw_bytes() -> st.SearchStrategy[bytes]:
    return st.binary(min_size=1, max_size=300)


def json_values() -> st.SearchStrategy[bytes]:
    return _JSON.map(_dumps)


def deep() -> st.SearchStrategy[bytes]:
    return st.builds(
        lambda n, open_: open_ * n,
        st.integers(1, 60_000),
        st.sampled_from([b"[", b'{"a":', b"9"]),
    )


def event_bodies(first_seq: st.SearchStrategy[int]) -> st.SearchStrategy[bytes]:
    """Log messages shaped like Wayline's, wrong in one or more ways."""
    event = st.fixed_dictionaries(
        {"t": _TYPES},
        optional={"c": st.none() | st.text(max_size=4) | st.integers(), "d": _JSON},
    )
    body = st.fixed_dictionaries(
        {"s": first_seq | _JSON, "e": st.lists(event, max_size=3) | _JSON},
        optional={"r": _JSON, "lastSeq": st.integers()},
    )
    return body.map(_dumps)


def hook_entries(token: str) -> st.SearchStrategy[bytes]:
    entry = st.fixed_dictionaries(
        {},
        optional={
            "token": st.just(token) | st.text(max_size=4) | _JSON,
            "run": st.just("wf_" + "0" * 32) | st.text(max_size=6) | _JSON,
            "cid": st.text(max_size=3) | _JSON,
            "active": st.booleans() | _JSON,
        },
    )
    return entry.map(_dumps)


def idem_entries() -> st.SearchStrategy[bytes]:
    entry = st.fixed_dictionaries(
        {},
        optional={
            "mid": st.text(max_size=6) | _JSON,
            "topic": st.sampled_from(["flow", "step", ""]) | _JSON,
            "body": st.text(max_size=12) | _JSON,
            "due": st.none() | st.floats(allow_nan=False) | _JSON,
            "published": st.booleans() | _JSON,
        },
    )
    return entry.map(_dumps)


def queue_payloads(run_ids: list[str]) -> st.SearchStrategy[bytes]:
    payload = st.fixed_dictionaries(
        {},
        optional={
            "runId": st.sampled_from(run_ids) | st.text(max_size=8) | _JSON,
            "stepId": st.text(max_size=4) | _JSON,
            "stepName": st.text(max_size=4) | _JSON,
            "reason": st.text(max_size=4) | _JSON,
        },
    )
    return payload.map(_dumps)


def garbage(structured: st.SearchStrategy[bytes]) -> st.SearchStrategy[bytes]:
    return st.one_of(raw_bytes(), json_values(), deep(), structured, structured)


def cases(strategy: st.SearchStrategy[bytes], n: int) -> list[bytes]:
    out: list[bytes] = []

    @settings(
        max_examples=n,
        database=None,
        phases=[Phase.generate],
        deadline=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(strategy)
    def collect(value: bytes) -> None:
        out.append(value)

    collect()
    return out[:n]
