"""What the fast codec's ``dumps`` pays for output that holds a ``null``.

    python -P bench/codec_nulls.py [--rounds 4] [--number 20000]

(``-P``: bench/operator.py would otherwise shadow the standard library's ``operator``.)

orjson writes NaN and the infinities as ``null``, where ``json`` writes ``NaN`` and
``Infinity``, so ``wayline._core.jsoncodec``'s fast ``dumps`` checks every output holding a
``null`` (on NATS nearly every append: a run summary's ``"output": null, "error": null``).
Before, it read the output back with orjson and compared it with the value ("read back");
now msgspec packs the value as MessagePack and a search looks for a non-finite float's bytes
("packed"). This times the whole ``dumps`` each way on a run summary and on an append of four
step events, alternating the two, and prints microseconds a call (the best of three repeats,
min-max over the rounds) and the ratio packed over read back within each round.
"""

from __future__ import annotations

import argparse
import timeit
from collections.abc import Callable
from typing import Any

import orjson

from wayline._core import jsoncodec

SUMMARY: dict[str, Any] = {
    "runId": "r-0123456789abcdef",
    "workflow": "orders.process",
    "status": "running",
    "input": {"order": 1234, "items": ["a", "b"]},
    "output": None,
    "error": None,
    "createdAt": 1765100000.123,
    "updatedAt": 1765100001.5,
    "attempt": 1,
    "parent": None,
    "tags": {"team": "x"},
}
STEP = {
    "type": "step_completed",
    "stepId": "s1",
    "correlationId": "c-1",
    "data": {"result": {"ok": True, "n": 3, "v": [1.5, 2.5, None]}, "error": None},
    "at": 1765100000.1,
}
APPEND = {"e": [STEP] * 4}


def _read_back() -> Callable[[Any], bytes]:
    """The fast ``dumps`` as it was at 5b33da8: a null is checked by decoding the output."""
    options = (
        orjson.OPT_PASSTHROUGH_SUBCLASS
        | orjson.OPT_PASSTHROUGH_DATACLASS
        | orjson.OPT_PASSTHROUGH_DATETIME
    )
    encode, decode, std = orjson.dumps, orjson.loads, jsoncodec.std_dumps

    def refuse(value: Any) -> Any:
        raise TypeError(type(value).__name__)

    def dumps(value: Any) -> bytes:
        try:
            data = encode(value, default=refuse, option=options)
        except TypeError:
            return std(value)
        if not data.isascii():
            return std(value)
        if b"null" in data and decode(data) != value:
            return std(value)
        return data

    return dumps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--number", type=int, default=20000)
    args = parser.parse_args()
    packed, _ = jsoncodec.codec("fast")
    ways = {"read back": _read_back(), "packed": packed}
    for name, value in (("run summary", SUMMARY), ("append of 4 step events", APPEND)):
        assert ways["read back"](value) == ways["packed"](value)
        times: dict[str, list[float]] = {way: [] for way in ways}
        ratios = []
        for _ in range(args.rounds):
            for way, dumps in ways.items():
                call = lambda d=dumps, v=value: d(v)  # noqa: E731
                best = min(timeit.repeat(call, number=args.number, repeat=3))
                times[way].append(best / args.number * 1e6)
            ratios.append(times["packed"][-1] / times["read back"][-1])
        cells = ", ".join(f"{w} {min(t):.2f}-{max(t):.2f} us" for w, t in times.items())
        print(f"{name}: {cells}; packed/read back {min(ratios):.2f}-{max(ratios):.2f}")


if __name__ == "__main__":
    main()
