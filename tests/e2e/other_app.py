"""A second application for the e2e suite: its own worker Deployment serves only this file
(mounted from the same ConfigMap as ``flows.py``), whose workflow no worker of the first
application has. Its runs must never be touched by the first application's workers."""

from __future__ import annotations

import wayline


@wayline.step(name="e2e.other.count")
def count(key: str, n: int) -> str:
    return f"{key} counted {n}"


@wayline.workflow(name="tally")
async def tally(key: str) -> str:
    """One step: a run only a worker of this application can drive."""
    return await count(key, 3)
