"""Must fail ``mypy --strict``: a flow message's reason is a ``WakeReason``, so a misspelt
reason is a type error where it is written, not a free-text typo on the queue."""

from __future__ import annotations

from wayline._core.messages import Wake, WakeReason
from wayline.world import World, flow_message


def wakes(world: World) -> None:
    Wake("wf_1", WakeReason.CHILD).to_wire()
    Wake("wf_1", "child").to_wire()  # E: Argument 2 to "Wake" has incompatible type "str"
    flow_message(world, "wf_1", WakeReason.HOOK)
    flow_message(world, "wf_1", "hook")  # E: Argument 3 to "flow_message" has incompatible type
