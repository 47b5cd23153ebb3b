"""Must fail ``mypy --strict``: a name ``wayline`` does not have is an error, not ``object``."""

from __future__ import annotations

import wayline


@wayline.workflow
async def nap(hours: int) -> None:
    await wayline.slep(hours)  # E: Module has no attribute "slep"
    wayline.NatsWorld(servers=1)  # E: Argument "servers" to "NatsWorld" has incompatible type "int"
