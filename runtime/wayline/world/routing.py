"""Routing, not bouncing: a run's messages go to a topic only workers able to drive it consume.

A run's flow and step messages are sent to ``flow:w:<workflow>`` / ``step:w:<workflow>``, or
to ``flow:q:<queue>`` / ``step:q:<queue>`` when the run was started with ``queue=``. The
route is fixed by the run's ``run_created`` (its workflow name and queue), so the world
resolves it from the run itself when a message is enqueued: no sender has to know it, and a
worker never receives a run of a workflow it does not serve (before, it answered "retry in
5 s", each answer a delivery counted against the run's budget). Messages that name no known
run keep the plain topic, which every worker also consumes.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

from .._core.projections import RunInfo

FLOW_TOPIC = "flow"
STEP_TOPIC = "step"
_CACHED = 50_000


def routed(topic: str, workflow: str, queue: str | None = None) -> str:
    """The topic a message of ``topic`` for a run of ``workflow`` (on ``queue``) goes to."""
    return f"{topic}:q:{queue}" if queue else f"{topic}:w:{workflow}"


def plain_topic(topic: str) -> str:
    """``flow`` for ``flow:w:order`` (what a delivery received on a route reports)."""
    return topic.partition(":")[0]


def served_topics(topic: str, workflows: Iterable[str], queue: str | None) -> list[str]:
    """What a worker serving ``workflows`` (on ``queue``) consumes for ``topic``: the routes,
    then the plain topic (messages for runs the world does not know)."""
    routes = [routed(topic, "", queue)] if queue else [routed(topic, w) for w in workflows]
    return [*routes, topic]


class Router:
    """Resolves a run's route from the world (once per run: it never changes)."""

    def __init__(self, get_run: Callable[[str], Awaitable[RunInfo | None]]) -> None:
        self._get_run = get_run
        self._routes: OrderedDict[str, tuple[str, str | None]] = OrderedDict()

    async def topic(self, topic: str, payload: Mapping[str, Any]) -> str:
        if topic not in (FLOW_TOPIC, STEP_TOPIC):
            return topic
        run_id = payload.get("runId")
        if not isinstance(run_id, str):
            return topic
        route = self._routes.get(run_id)
        if route is None:
            info = await self._get_run(run_id)
            if info is None:
                return topic
            route = self.remember(info)
        return routed(topic, *route)

    def remember(self, info: RunInfo) -> tuple[str, str | None]:
        """Note a run's route, known from its ``run_created`` (a world that just stored it
        tells the router, so the run's first enqueue reads nothing)."""
        queue = info.attributes.get("queue")
        route = (info.workflow, str(queue) if queue else None)
        self._routes[info.run_id] = route
        if len(self._routes) > _CACHED:
            self._routes.popitem(last=False)
        return route
