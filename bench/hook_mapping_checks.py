"""What a check by a recorded shape costs the console's loop for issue #37's new shapes, where
the console cannot import the hook's class (``wayline._sdk.hooks.check_shape``): a mapping
(``dict[str, int]``) of ``--keys`` keys and a list (``list[int]``) of as many items, alternating
within each round, so that the ratio says whether a key costs what an item costs; a mapping
of ten times the keys (a check's cost should grow with the keys, not their square); a closed
model (``extra="forbid"``) given as many unknown keys; and a union of two kinds of list
(``list[int] | list[str]``) whose items fit the second kind. Prints each one's milliseconds
(min-max over the rounds) and the ratios within each round.

    .venv/bin/python -m bench.hook_mapping_checks --rounds 5
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import pydantic
from bench.hook_shapes import _span

from wayline._sdk.hooks import check_shape, shape
from wayline.errors import InvalidPayloadError


class Counts(pydantic.BaseModel):
    counts: dict[str, int] = {}
    items: list[int] = []
    ids: list[int] | list[str] = []


class Shut(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid")
    name: str = ""


def _ms(recorded: dict[str, Any], payload: dict[str, Any]) -> float:
    start = time.perf_counter()
    try:
        check_shape(recorded, payload, "bench")
    except InvalidPayloadError:
        pass
    return (time.perf_counter() - start) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--keys", type=int, default=10_000)
    args = parser.parse_args()
    n = args.keys
    counts, shut = shape(Counts), shape(Shut)
    cases = {
        "list[int]": (counts, {"items": list(range(n))}),
        "dict[str, int]": (counts, {"counts": {f"k{i}": i for i in range(n)}}),
        "dict[str, int] x10": (counts, {"counts": {f"k{i}": i for i in range(10 * n)}}),
        "closed, unknown keys": (shut, {f"k{i}": i for i in range(n)}),
        "list[int] | list[str]": (counts, {"ids": [str(i) for i in range(n)]}),
    }
    times: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(args.rounds):
        for name, (recorded, payload) in cases.items():
            times[name].append(_ms(recorded, payload))
    base = times["list[int]"]
    for name, found in times.items():
        ratios = [t / b for t, b in zip(found, base, strict=True)]
        print(
            f"{name} ({n} keys or items, x10 where said): {_span(found)} ms, "
            f"ratio to list[int] {min(ratios):.2g}-{max(ratios):.2g}"
        )


if __name__ == "__main__":
    main()
