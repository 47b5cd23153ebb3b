"""What a check by a recorded shape costs the console's loop when a list item's ``options`` are
forged wide (``wayline._sdk.hooks.check_shape``, where the console cannot import the hook's
class): this tree's check against an older commit's, alternating within each round, for a
forged shape of ``--options`` plain options and one list option and a payload of ``--items``
lists, and for a writer's own ``list[Coin | int]`` shape and as many items (which both must
check alike). Then the recorder (``_bounded``, once per class and process on the worker's loop)
for ``list[Big | dict[str, Any]]`` beside a chain of 16 models, where ``Big`` has 2,300 fields
(``dict[str, int]`` until issue #37 recorded such mappings; ``dict[str, Any]`` is still not):
an element that is not recorded, whose model baaa862 walked in full on every walk. Prints
each one's milliseconds (min-max over the rounds), the ratio new/old within each round, and for
the recorder the levels of the chain each records.

    .venv/bin/python -m bench.hook_option_checks --old baaa862 --rounds 5
"""

from __future__ import annotations

import argparse
import time
from types import ModuleType
from typing import Any

import pydantic
from bench.hook_shapes import _old, _span
from tests.unit.test_either_hook_shape import BigOrMapping, _links

from wayline._sdk import hooks as new_hooks
from wayline.errors import InvalidPayloadError


class Coin(pydantic.BaseModel):
    code: str


class Purse(pydantic.BaseModel):
    mixed: list[Coin | int]


def _recorded_ms(module: ModuleType, schema: dict[str, Any]) -> tuple[float, int]:
    start = time.perf_counter()
    recorded = module._bounded(schema)
    return (time.perf_counter() - start) * 1000, _links(recorded)


def _ms(module: ModuleType, recorded: dict[str, Any], payload: dict[str, Any]) -> float:
    start = time.perf_counter()
    try:
        module.check_shape(recorded, payload, "bench")
    except InvalidPayloadError:
        pass
    return (time.perf_counter() - start) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--old", default="baaa862")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--options", type=int, default=2_000)
    parser.add_argument("--items", type=int, default=100)
    args = parser.parse_args()
    old = _old(args.old)
    options = [{"kinds": ["integer"]}] * args.options + [{"list": {"kinds": ["integer"]}}]
    forged = {"required": [], "fields": {"xs": ["array"]}, "items": {"xs": {"options": options}}}
    cases = {
        "forged": (forged, {"xs": [[1]] * args.items}),
        "writer": (new_hooks.shape(Purse), {"mixed": [{"code": "A"}, 1] * (args.items // 2)}),
    }
    for name, (recorded, payload) in cases.items():
        olds: list[float] = []
        news: list[float] = []
        ratios: list[float] = []
        for _ in range(args.rounds):
            olds.append(_ms(old, recorded, payload))
            news.append(_ms(new_hooks, recorded, payload))
            ratios.append(news[-1] / olds[-1])
        print(
            f"{name}: {args.old} {_span(olds)} ms, this tree {_span(news)} ms, "
            f"ratio new/old {min(ratios):.2g}-{max(ratios):.2g}"
        )

    schema = new_hooks._schema(BigOrMapping)  # pydantic's own, not timed
    olds, news, ratios, levels = [], [], [], set()
    for _ in range(args.rounds):
        (old_ms, old_levels), (new_ms, new_levels) = (
            _recorded_ms(old, schema),
            _recorded_ms(new_hooks, schema),
        )
        olds.append(old_ms)
        news.append(new_ms)
        ratios.append(new_ms / old_ms)
        levels.add((old_levels, new_levels))
    print(
        f"recorder: {args.old} {_span(olds)} ms, this tree {_span(news)} ms, "
        f"ratio new/old {min(ratios):.2g}-{max(ratios):.2g}, levels old/new {sorted(levels)}"
    )


if __name__ == "__main__":
    main()
