"""Routing, not bouncing: a run's messages go to a topic only workers able to drive it consume.

A run's flow and step messages are sent to ``flow:w:<workflow>@<pin>`` / ``step:w:<workflow>@<pin>``
once the run is pinned to a definition (``<pin>``: its identity and revision, and its code hash
under ``strict_identity``; recorded by ``run_created`` for a run started with a definition, by
its first ``run_started`` for one started by name); to ``flow:w:<workflow>`` /
``step:w:<workflow>`` while it is not pinned yet; or to ``flow:q:<queue>`` / ``step:q:<queue>``
when the run was started with ``queue=`` (an explicit grouping). The world resolves the route
from the run itself when a message is enqueued: no sender has to know it, a worker never
receives a run of a workflow it does not serve (before, it answered "retry in 5 s", each
answer a delivery counted against the run's budget), nor a run pinned to another revision of a
workflow it serves (before, it marked the run blocked). Messages that name no known run keep
the plain topic, which every worker also consumes. Topics are any strings: the NATS world
encodes each as one subject token.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

from .._core.definitions import WorkflowDefinition
from .._core.projections import RunInfo

FLOW_TOPIC = "flow"
STEP_TOPIC = "step"
_CACHED = 50_000


def pin_of(record: Any) -> str | None:
    """The route part naming the definition a run is pinned to (its recorded ``definition``:
    see ``WorkflowDefinition.identity_record``); None when it records none. Exactly what
    ``WorkflowDefinition.mismatch`` compares, so one route never mixes definitions that may
    not drive each other's runs."""
    if not isinstance(record, Mapping) or not record.get("identity"):
        return None
    pin = f"{record['identity']}-r{record.get('revision')}"
    if record.get("strictIdentity"):
        pin += f"-c{record.get('codeHash')}"
    return pin


def routed(topic: str, workflow: str, queue: str | None = None, pin: str | None = None) -> str:
    """The topic a message of ``topic`` for a run of ``workflow`` (on ``queue``, pinned to
    ``pin``) goes to."""
    if queue:
        return f"{topic}:q:{queue}"
    return f"{topic}:w:{workflow}@{pin}" if pin else f"{topic}:w:{workflow}"


def route_of(topic: str, workflow: WorkflowDefinition[..., Any]) -> str:
    """The route of ``topic`` for runs pinned to ``workflow``'s own definition."""
    return routed(topic, workflow.name, pin=pin_of(workflow.identity_record()))


def routes_of(topic: str, workflow: WorkflowDefinition[..., Any]) -> list[str]:
    """The routes of ``topic`` for runs pinned to ``workflow``'s definition: its own, then
    those of the older identities it still serves (``WorkflowDefinition.identities``)."""
    return [routed(topic, workflow.name, pin=pin_of(r)) for r in workflow.identity_records()]


def plain_topic(topic: str) -> str:
    """``flow`` for ``flow:w:order@...`` (what a delivery received on a route reports)."""
    return topic.partition(":")[0]


def served_topics(
    topic: str,
    workflows: Iterable[WorkflowDefinition[..., Any]],
    queue: str | None,
    *,
    draining: bool = False,
) -> list[str]:
    """What a worker serving ``workflows`` (on ``queue``) consumes for ``topic``: the routes
    (for each workflow, its runs pinned to its definition or to an older identity it still
    serves, and its runs not pinned yet), then
    the plain topic (messages for runs the world does not know).

    A ``draining`` worker leaves out the route of runs not pinned yet: it never takes a run's
    first delivery, so a new run waits on that route for a worker that is not draining (the
    current version's) instead of pinning itself to a version on its way out. A queue's route
    mixes pinned and unpinned runs, so a draining queue worker still consumes all of it, and
    hands a run not pinned yet back without spending an attempt (``Handler._admit``)."""
    if queue:
        return [routed(topic, "", queue), topic]
    routes = [
        r
        for w in workflows
        for r in (*routes_of(topic, w), *(() if draining else (routed(topic, w.name),)))
    ]
    return [*routes, topic]


class Router:
    """Resolves a run's route from the world (cached once the route can no longer change:
    the run is pinned, or on a queue; an unpinned run is read again until its pin)."""

    def __init__(self, get_run: Callable[[str], Awaitable[RunInfo | None]]) -> None:
        self._get_run = get_run
        self._routes: OrderedDict[str, tuple[str, str | None, str | None]] = OrderedDict()
        self._fresh: OrderedDict[str, tuple[str, str | None, str | None]] = OrderedDict()

    async def topic(self, topic: str, payload: Mapping[str, Any]) -> str:
        if topic not in (FLOW_TOPIC, STEP_TOPIC):
            return topic
        run_id = payload.get("runId")
        if not isinstance(run_id, str):
            return topic
        route = self._routes.get(run_id) or self._fresh.pop(run_id, None)
        if route is None:
            info = await self._get_run(run_id)
            if info is None:
                return topic
            route = self._note(info)
        return routed(topic, *route)

    def remember(self, info: RunInfo) -> None:
        """Note a run's route, known from its ``run_created`` (a world that just stored it
        tells the router, so the run's first enqueue reads nothing). A route that can still
        change (the run is not pinned yet) serves that one next enqueue only."""
        route = self._note(info)
        if not (route[1] or route[2]):
            self._fresh[info.run_id] = route
            if len(self._fresh) > _CACHED:
                self._fresh.popitem(last=False)

    def _note(self, info: RunInfo) -> tuple[str, str | None, str | None]:
        queue = info.attributes.get("queue")
        pin = pin_of(info.attributes.get("definition"))
        route = (info.workflow, str(queue) if queue else None, pin)
        if queue or pin:
            self._routes[info.run_id] = route
            if len(self._routes) > _CACHED:
                self._routes.popitem(last=False)
        return route
