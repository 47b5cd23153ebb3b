"""Workflows the hostile-bytes tests drive."""

from __future__ import annotations

import wayline


@wayline.step
async def bump(path: str, label: str) -> str:
    """A counter: one line per body that really ran."""
    with open(path, "a") as f:  # noqa: ASYNC230 - a tiny local marker file
        f.write(label + "\n")
    return label


@wayline.workflow
async def gated(path: str, token: str) -> object:
    await bump(path, "before")
    payload = await wayline.create_hook(token)
    await bump(path, "after")
    return payload


def count(path: str, label: str) -> int:
    try:
        with open(path) as f:
            return sum(1 for line in f if line.strip() == label)
    except FileNotFoundError:
        return 0


@wayline.step
async def big_result(path: str, size: int) -> str:
    with open(path, "a") as f:  # noqa: ASYNC230 - a tiny local marker file
        f.write("big\n")
    return "x" * size


@wayline.step
async def takes(value: str) -> int:
    return len(value)


@wayline.workflow
async def oversized(path: str, size: int, where: str) -> str:
    try:
        if where == "result":
            await big_result(path, size)
        else:
            await takes("y" * size)
    except wayline.PayloadTooLargeError as err:  # the step argument, refused at the call
        return f"caught {err.code} {err.size} {err.limit}"
    except wayline.StepFailedError as err:  # the step's result: the step failed
        return f"caught {err.code}: {err.message}"
    return "no error"


@wayline.workflow
async def returns(size: int) -> str:
    return "z" * size


@wayline.step
async def one() -> int:
    return 1


@wayline.workflow
async def chain_of(n: int) -> int:
    total = 0
    for _ in range(n):
        total += await one()
    return total
