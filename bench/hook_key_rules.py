"""What a check of mapping keys by their recorded pattern and lengths costs the console's loop
(``wayline._sdk.hooks.check_shape``, issue #37), where the console cannot import the hook's
class: a mapping of ``--keys`` keys with a pattern and lengths (``dict[Code, int]``) against the
same keys of a plain string mapping (``dict[str, int]``), alternating within each round; and a
forged pattern ``(a+)+$`` against one key of ``a``s and a ``!`` by the check (pydantic-core's
regex engine), beside Python's ``re`` on a key of ``--re-length`` ``a``s, which is what the
check would cost had it used ``re`` (each ``a`` more doubles it). Prints each one's
milliseconds (min-max over the rounds) and the ratios within each round.

    .venv/bin/python -m bench.hook_key_rules --rounds 5
"""

from __future__ import annotations

import argparse
import re
import time
from typing import Annotated

import pydantic
from bench.hook_mapping_checks import _ms
from bench.hook_shapes import _span
from pydantic import StringConstraints

from wayline._sdk.hooks import shape

Code = Annotated[str, StringConstraints(pattern=r"^[a-z]{2}-\d+$", min_length=4, max_length=12)]


class Codes(pydantic.BaseModel):
    codes: dict[Code, int] = {}
    plain: dict[str, int] = {}


def _re_ms(length: int) -> float:
    start = time.perf_counter()
    re.search(r"(a+)+$", "a" * length + "!")
    return (time.perf_counter() - start) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--keys", type=int, default=10_000)
    parser.add_argument("--re-length", type=int, default=20)
    args = parser.parse_args()
    n = args.keys
    recorded = shape(Codes)
    forged = {
        "required": [],
        "fields": {"m": ["object"]},
        "maps": {"m": {"map": {"any": True}, "key": {"kinds": ["string"], "pattern": "(a+)+$"}}},
    }
    keys = [f"ab-{i}" for i in range(n)]
    cases = {
        "dict[str, int]": lambda: _ms(recorded, {"plain": dict.fromkeys(keys, 1)}),
        "dict[Code, int]": lambda: _ms(recorded, {"codes": dict.fromkeys(keys, 1)}),
        "forged (a+)+$, 40,000 a": lambda: _ms(forged, {"m": {"a" * 40_000 + "!": 1}}),
        f"Python re, {args.re_length} a": lambda: _re_ms(args.re_length),
    }
    times: dict[str, list[float]] = {name: [] for name in cases}
    ratios: list[float] = []
    for _ in range(args.rounds):
        for name, run in cases.items():
            times[name].append(run())
        ratios.append(times["dict[Code, int]"][-1] / times["dict[str, int]"][-1])
    for name, found in times.items():
        print(f"{name}: {_span(found)} ms")
    print(f"dict[Code, int] / dict[str, int] in each round: {_span(ratios)}")


if __name__ == "__main__":
    main()
