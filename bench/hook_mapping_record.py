"""What recording a typed hook's shape costs (``wayline._sdk.hooks.shape``, once per class in a
worker) for a wide model of mappings of models (``--maps`` fields of ``dict[str, Leaf]``,
``Leaf`` of ``--fields`` integer fields), by this tree and by the hooks module of each
``--commit`` (read with ``git show``), alternating within each round. Prints each tree's
milliseconds (min-max over the rounds), the shape's bytes and the ratios to the first tree.

    .venv/bin/python -m bench.hook_mapping_record --commit eb18ecc --commit eadd2b8
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

import pydantic
from bench.hook_shapes import _old

from wayline._sdk import hooks


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--commit", action="append", default=[])
    parser.add_argument("--maps", type=int, default=100)
    parser.add_argument("--fields", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    leaf: Any = pydantic.create_model("Leaf", **{f"f{i}": (int, 0) for i in range(args.fields)})
    wide: Any = pydantic.create_model(
        "Wide", **{f"m{i}": (dict[str, leaf], {}) for i in range(args.maps)}
    )
    trees = [(c, _old(c)) for c in args.commit] + [("this tree", hooks)]
    took: dict[str, list[float]] = {name: [] for name, _ in trees}
    for _ in range(args.rounds):
        for name, module in trees:
            start = time.perf_counter()
            module.shape(wide)
            took[name].append(time.perf_counter() - start)
    first = trees[0][0]
    for name, module in trees:
        size = len(json.dumps(module.shape(wide)))
        ratios = [round(t / f, 2) for t, f in zip(took[name], took[first], strict=True)]
        print(
            f"{name}: {min(took[name]) * 1000:.0f}-{max(took[name]) * 1000:.0f} ms, "
            f"{size} bytes, over {first}: {ratios}"
        )


if __name__ == "__main__":
    main()
