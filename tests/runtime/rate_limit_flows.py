"""Workflows whose steps (or runs) have rate limits (``test_rate_limits``). Every step body
writes ``start TAG TIME`` to a marker file, so a test counts how often each ran and when."""

from __future__ import annotations

import time

import wayline
from tests.runtime.flows import lines, mark

PACED = wayline.RateLimit(rate="4/s", burst=1)


@wayline.step(name="rate_limit_flows.paced", rate_limit=PACED)
async def paced(path: str, tag: str) -> str:
    mark(path, f"start {tag} {time.time()}")
    return tag


@wayline.workflow(name="rate_limit_flows.paced_once")
async def paced_once(path: str, tag: str) -> str:
    return await paced(path, tag)


SLOW = wayline.RateLimit(rate="6/m", burst=1, key=lambda path, user: user)
"""A token every 10 s per user: a test that empties the bucket sees a step wait visibly, even
when a loaded machine takes seconds to start its worker and runs (at 30/m the token came due
within 2 s, before the step reached the limit, in a CI run at load 8)."""


@wayline.step(name="rate_limit_flows.per_user", rate_limit=SLOW, max_retries=0)
async def per_user(path: str, user: str) -> str:
    mark(path, f"start {user} {time.time()}")
    return user


@wayline.workflow(name="rate_limit_flows.notify")
async def notify(path: str, user: str) -> str:
    return await per_user(path, user)


RUNS = wayline.RateLimit(rate="30/m", burst=1, key="all")


@wayline.workflow(name="rate_limit_flows.limited_run", rate_limit=RUNS)
async def limited_run(tag: str) -> str:
    return tag


def starts(path: str) -> list[tuple[str, float]]:
    """The bodies' starts, in order: (tag, wall clock time)."""
    out = []
    for line in lines(path):
        _, tag, at = line.split()
        out.append((tag, float(at)))
    return out


def _no_key(path: str, user: str) -> str:
    raise LookupError(f"no bucket for {user}")


@wayline.step(
    name="rate_limit_flows.unkeyed", rate_limit=wayline.RateLimit(rate="1/s", key=_no_key)
)
async def unkeyed(path: str, user: str) -> str:
    mark(path, f"start {user} {time.time()}")
    return user


@wayline.workflow(name="rate_limit_flows.notify_unkeyed")
async def notify_unkeyed(path: str, user: str) -> str:
    return await unkeyed(path, user)
