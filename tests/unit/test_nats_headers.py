"""The NATS world's header parser gives exactly what nats-py's own gives."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from nats.aio.client import Client

from wayline.worlds.nats.codec import parse_header_lines

_piece = st.sampled_from(
    [
        b"Nats-Msg-Id",
        b"Nats-Time-Stamp",
        b"a b",
        b" x ",
        b"\t",
        b"\x1cK",
        b"K\x1f",
        b"\xff\xfe",
        b"",
        b":",
        b": ",
        b"v\xc3\xa9",
        b"\xc3",
        b"2026-12-02T12:33:03.18Z",
        b"\r\n",
        b"NATS/1.0",
    ]
)


@settings(max_examples=400)
@given(st.lists(st.tuples(_piece, _piece, _piece), max_size=6))
def test_same_as_nats_py(parts: list[tuple[bytes, bytes, bytes]]) -> None:
    raw = b"".join(a + b + c + b"\r\n" for a, b, c in parts) + b"\r\n"
    assert parse_header_lines(raw) == Client._parse_header_lines(raw)


def test_typical_block() -> None:
    raw = b"Nats-Stream: EV\r\nNats-Sequence: 12\r\nbad name: x\r\nNats-Time-Stamp:  t \r\n\r\n"
    assert parse_header_lines(raw) == {
        "Nats-Stream": "EV",
        "Nats-Sequence": "12",
        "Nats-Time-Stamp": "t",
    }
