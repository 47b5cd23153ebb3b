"""What the operator does for one ``WorkflowRun``, apart from kopf: start its run, carry its
spec's decisions (cancel, compensation) to the world, and compute its status. The kopf
handlers (``handlers``) call these; tests can too."""

from __future__ import annotations

import logging
from typing import Any

import pydantic

from wayline import Client, IdReusePolicy, StartOptions
from wayline.durations import to_seconds
from wayline.errors import (
    HookNotFoundError,
    RunAlreadyExistsError,
    RunNotFoundError,
    RunTerminalError,
    WaylineError,
    WorldError,
    WrongNamespaceError,
)
from wayline.history import PAUSABLE, Event, EventType, RunStatus
from wayline.settings import Settings
from wayline.world import RunInfo, World
from wayline.world.registry import debounced

from .resource import WorkflowHookSpec, WorkflowRunSpec
from .status import resumes_recorded

log = logging.getLogger("wayline.operator")
_BY = "operator"
"""Who the log says paused a run for its ``spec.paused``: only such a pause is lifted by it."""


class InvalidSpec(Exception):
    """The resource cannot start a run: its spec is wrong, or names a run of another kind."""


def run_id_for(uid: str) -> str:
    """The run id derived from the resource's uid: the id of every run that operators before
    business ids started, and of a run started with no resource name (``Reconciler.start``
    without ``name``). Such a run keeps its id: a resource's ``status.runId`` names it."""
    return "wf_" + uid.replace("-", "").lower()


OWNER_MEMO = "wayline.dev/workflowrun-uid"
"""The memo key (``StartOptions.memo``) under which a run records the uid of the WorkflowRun
that started it: a start retried after a crash finds its own run by it, and tells it from the
run of an earlier resource of the same name."""


_START_ROUNDS = 5
"""Rounds of reading the name's newest run and starting one, while other starters race."""


class IdInUse(Exception):
    """The resource's name is the business id of a live run that another resource (an earlier
    one of the same name, deleted since) or another client started: nothing is started until
    that run ends."""

    def __init__(self, message: str, run_id: str) -> None:
        super().__init__(message)
        self.run_id = run_id


def _abandoned(events: list[Event]) -> bool:
    """The run's latest park was abandoned (it stays parked until a worker ends it): a resume
    is refused from then on (``Client.resume_compensation``), and a second abandon is moot."""
    abandoned = False
    for e in events:
        if e.type is EventType.RUN_COMPENSATION_STUCK:
            abandoned = False
        elif e.type is EventType.RUN_COMPENSATION_ABANDONED:
            abandoned = True
    return abandoned


class HookNotReady(Exception):
    """No hook holds the token yet (its run has not reached it): try again later."""


class HookBuffered(HookNotReady):
    """No hook holds the token yet, and the payload is stored for the hook to come
    (``spec.buffer``): looked at again until a run takes it or it expires."""


class WrongNamespace(Exception):
    """The hook holding the token belongs to a run not started in the WorkflowHook's
    namespace: nothing is delivered, and the hook stays open for its own namespace."""


def parse_spec(spec: Any) -> WorkflowRunSpec:
    parsed: WorkflowRunSpec = _parse(spec, WorkflowRunSpec)
    return parsed


def _parse(spec: Any, model: Any) -> Any:
    try:
        return model.model_validate(dict(spec or {}))
    except pydantic.ValidationError as err:
        problems = "; ".join(
            f"spec.{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in err.errors()
        )
        raise InvalidSpec(problems) from None


class Reconciler:
    def __init__(self, world: World) -> None:
        self.world = world
        self._settings = Settings.from_env()
        self.client = Client(world, settings=self._settings)
        self._clients: dict[str, Client] = {}

    def client_in(self, namespace: str | None) -> Client:
        """A client of ``namespace``: the runs it starts record it (their children inherit
        it), and it resumes only hooks of runs recorded in it. Tokens are the world's, so
        this is what confines a namespace's WorkflowHooks to that namespace's runs."""
        if not namespace:
            return self.client
        client = self._clients.get(namespace)
        if client is None:
            client = Client(self.world, settings=self._settings, namespace=namespace)
            self._clients[namespace] = client
        return client

    async def start(
        self,
        uid: str,
        spec: Any,
        namespace: str | None = None,
        name: str | None = None,
        known: str | None = None,
    ) -> str:
        """Start the resource's run (idempotent) and return its id. The run records the
        resource's ``namespace``: only that namespace's WorkflowHooks answer its hooks.

        With ``name`` (the resource's ``metadata.name``) the name is the run's business id in
        the client namespace ``namespace``, so ``wayline runs show NAME --namespace NS``
        finds it; the run's memo records ``uid``. A run already started for this resource (an
        operator that crashed before it wrote ``status.runId``, or one from before business
        ids, whose id is the uid's) is returned as it is. An ended run of the name that
        another resource started leaves the name to this one (a new run under it); a live one
        raises :class:`IdInUse`. Without ``name``, or when the status already names the uid's
        run id (``known``: a resource from before business ids, its run started again in this
        world), the run id is the uid's (``run_id_for``)."""
        parsed = parse_spec(spec)
        client = self.client_in(namespace)
        try:
            run_id = run_id_for(uid)
            if await self._debounced(client, parsed.workflow, uid, name):
                raise InvalidSpec(
                    f"workflow {parsed.workflow!r} is debounced (wayline.Debounce): its starts "
                    "are collapsed by a key its code computes from the input, which the "
                    "operator does not run, so a WorkflowRun cannot start it; start it with a "
                    "client that imports it (wayline start MODULE:WORKFLOW, Client.start)"
                )
            if name is None or known == run_id:
                await client.start_with(
                    StartOptions(run_id=run_id, **parsed.ordering()),
                    parsed.workflow,
                    *parsed.args(),
                )
                return run_id
            return await self._start_by_name(client, uid, name, parsed)
        except WorldError:
            raise  # the world's trouble, not the spec's: retried
        except WaylineError as err:
            raise InvalidSpec(err.message) from None

    async def _debounced(self, client: Client, workflow: str, uid: str, name: str | None) -> bool:
        """Whether ``workflow`` is debounced (as its live workers, or with none live its last
        one, say: ``registry.debounced``), and this resource has no run
        yet (one started before the workflow was debounced is left to go on)."""
        if not debounced(workflow, await self.world.list_served(), self.world.now()):
            return False
        if await self.world.get_run(run_id_for(uid)) is not None:
            return False
        newest = await self._newest(client, name) if name is not None else None
        return newest is None or _owner(newest) != uid

    async def _start_by_name(
        self, client: Client, uid: str, name: str, parsed: WorkflowRunSpec
    ) -> str:
        if await self.world.get_run(run_id_for(uid)) is not None:
            return await self._again(client, run_id_for(uid), parsed)  # from before names
        for _ in range(_START_ROUNDS):
            newest = await self._newest(client, name)
            if newest is not None and _owner(newest) == uid:
                return await self._again(client, newest.run_id, parsed)
            if newest is not None and not newest.status.terminal:
                raise IdInUse(
                    f"the name {name!r} is the id of run {newest.run_id} ({newest.status}), "
                    "which another WorkflowRun or client started and which has not ended: "
                    "this resource starts its run once that one has ended",
                    newest.run_id,
                )
            # A new run under the name, fenced on what was just read: with nothing read, a
            # start refuses any run found meanwhile (reject_duplicate); after an ended run of
            # someone else's, it starts the next one. A run that two operators (or a start
            # retried while the first was under way) created meanwhile makes the start fail,
            # and the next round finds it: its own resource's is then this one's.
            reuse: IdReusePolicy = "reject_duplicate" if newest is None else "allow_duplicate"
            options = StartOptions(
                id=name,
                id_conflict="fail",
                id_reuse=reuse,
                memo={OWNER_MEMO: uid},
                **parsed.ordering(),
            )
            try:
                handle = await client.start_with(options, parsed.workflow, *parsed.args())
            except RunAlreadyExistsError:
                continue
            return handle.run_id
        raise WorldError(f"the runs of name {name!r} kept changing while a run was started")

    async def _again(self, client: Client, run_id: str, parsed: WorkflowRunSpec) -> str:
        """This resource's own run, started before a crash or a restart: started again by its
        run id, which re-sends the start of a live run (it may have lost it) and sends
        nothing for one that ended."""
        options = StartOptions(run_id=run_id, **parsed.ordering())
        await client.start_with(options, parsed.workflow, *parsed.args())
        return run_id

    async def _newest(self, client: Client, name: str) -> RunInfo | None:
        try:
            run_id = await client.resolve(name)
        except RunNotFoundError:
            return None
        return await self.world.get_run(run_id)

    async def act(self, run_id: str, spec: Any) -> None:
        """Carry the spec's decisions to the resource's run ``run_id``: a terminate, a cancel,
        a compensation resume or abandon. Each is done once however often this is called (it
        compares with the log)."""
        parsed = parse_spec(spec)
        info = await self.world.get_run(run_id)
        if info is None or info.status.terminal:
            return
        if parsed.terminate:
            log.info("run %s: terminated by its WorkflowRun", run_id)
            await self.client.terminate(run_id, reason="terminated by its WorkflowRun")
            return
        await self._pause_as_asked(run_id, info, parsed.paused)
        stuck = info.status is RunStatus.COMPENSATION_STUCK
        if not parsed.cancel and not stuck:
            return  # nothing asked of a live run: no need to read its log
        events = await self.world.list_events(run_id)
        if parsed.cancel:
            await self._cancel_once(run_id, events, "cancelled by its WorkflowRun")
        if not stuck:
            return
        if _abandoned(events):
            return  # this park was answered (abandoned); a worker ends the run, nothing to do
        wanted = parsed.compensation
        if wanted.abandon:
            log.info("run %s: compensation abandoned by its WorkflowRun", run_id)
            await self.client.abandon_compensation(run_id)
        elif wanted.resumes > resumes_recorded(events):
            log.info("run %s: compensation resumed by its WorkflowRun", run_id)
            await self.client.resume_compensation(run_id)

    async def _pause_as_asked(self, run_id: str, info: RunInfo, paused: bool) -> None:
        """``spec.paused``: pause a pending or running run, and lift a pause this field made
        once it is false again (a person's own pause, from the CLI, is theirs to lift). A run
        that cannot be paused now (blocked, compensating) is paused on a later look."""
        by = (info.error or {}).get("by") if info.status is RunStatus.PAUSED else None
        if paused and info.status in PAUSABLE:
            log.info("run %s: paused by its WorkflowRun", run_id)
            try:
                await self.client.pause(run_id, "spec.paused set on its WorkflowRun", by=_BY)
            except RunTerminalError:
                pass  # ended meanwhile: its status says so on the next look
            except WorldError:
                raise  # the world's trouble: retried
            except WaylineError as err:  # cancelled, or blocked meanwhile
                log.info("run %s: not paused now: %s", run_id, err.message)
        elif not paused and by == _BY:
            log.info("run %s: unpaused by its WorkflowRun", run_id)
            try:
                await self.client.unpause(run_id, "spec.paused cleared on its WorkflowRun", by=_BY)
            except RunTerminalError:
                pass

    async def observe(
        self, run_id: str, known_seq: int | None = None
    ) -> tuple[RunInfo, list[Event]] | None:
        """The run and its log; None when the run does not exist, or when ``known_seq`` is
        current."""
        info = await self.world.get_run(run_id)
        if info is None:
            return None
        if info.last_seq == known_seq:
            return None
        return info, await self.world.list_events(run_id)

    async def deliver(
        self, uid: str, spec: Any, namespace: str | None, created: float | None = None
    ) -> str:
        """Deliver a ``WorkflowHook``'s payload, once (the resource's uid is the delivery id,
        so a retry after a crash delivers nothing twice); returns the run it went to. Only to
        a run started in the hook's ``namespace`` (``WrongNamespace`` otherwise; None, as
        outside a cluster, answers any run)."""
        parsed: WorkflowHookSpec = _parse(spec, WorkflowHookSpec)
        client = self.client_in(namespace)
        try:
            if parsed.buffer is not None:
                return await self._buffered(client, parsed, uid, created)
            run_id = await client.resume_hook(parsed.token, parsed.payload, delivery_id=uid)
        except WrongNamespaceError as err:
            raise WrongNamespace(err.message) from None
        except HookNotFoundError as err:
            if not err.details.get("known"):
                raise HookNotReady(err.message) from None
            raise InvalidSpec(err.message) from None
        except WorldError:
            raise
        except WaylineError as err:  # a payload that cannot be serialised, say
            raise InvalidSpec(err.message) from None
        return run_id

    async def _buffered(
        self, client: Client, spec: WorkflowHookSpec, uid: str, created: float | None
    ) -> str:
        """``spec.buffer``: store the payload (under the resource's uid, so a look again
        stores nothing twice) unless a hook holds the token, and on each later look answer
        where it went: the run that took it, still waiting, or expired (``created``: when the
        resource was made, so that an expired entry swept away is not stored anew)."""
        try:
            seconds = to_seconds(spec.buffer or "")
        except ValueError as err:
            raise InvalidSpec(f"spec.buffer: {err}") from None
        token, now = spec.token, self.world.now()
        entry = await self.world.hook_buffer().get(client.namespace or "", token)
        if entry is not None and entry.entry_id == uid:
            if entry.taken_by is not None:
                return entry.taken_by
            if not entry.expired(now):
                found = await client.deliver_buffered(token)
                if found is not None:
                    return found
                raise HookBuffered(f"payload for hook {token} buffered for {spec.buffer}")
        if (entry is not None and entry.entry_id == uid) or (
            created is not None and created + seconds <= now
        ):
            raise InvalidSpec(
                f"the payload buffered for hook {token} expired after {spec.buffer}: no run "
                "created a hook for the token in time"
            )
        run_id = await client.resume_hook(token, spec.payload, delivery_id=uid, buffer=seconds)
        if run_id is None:
            raise HookBuffered(f"payload for hook {token} buffered for {spec.buffer}")
        return run_id

    async def owns(self, uid: str, run_id: str) -> bool:
        """Whether the run ``run_id`` is the resource ``uid``'s to act on: its uid's own id (a
        resource from before business ids), or a run whose memo names the resource. A
        ``status.runId`` is written by whoever may patch the status subresource, so it never
        decides alone which run a cancel, a terminate or a pause reaches."""
        if run_id == run_id_for(uid):
            return True
        info = await self.world.get_run(run_id)
        return info is None or _owner(info) == uid

    async def stop(self, run_id: str) -> None:
        """The resource is being deleted: cancel its run ``run_id`` (durably requested; a
        worker finishes it, compensations included). A run that ended, or never started,
        needs nothing."""
        info = await self.world.get_run(run_id)
        if info is None or info.status.terminal:
            return
        events = await self.world.list_events(run_id)
        await self._cancel_once(run_id, events, "its WorkflowRun was deleted")

    async def _cancel_once(self, run_id: str, events: list[Event], reason: str) -> None:
        if not any(e.type is EventType.RUN_CANCEL_REQUESTED for e in events):
            log.info("run %s: %s", run_id, reason)
            await self.client.cancel(run_id, reason=reason)


def _owner(info: RunInfo) -> str | None:
    """The uid of the WorkflowRun that started the run (its memo), if one did."""
    memo = info.attributes.get("memo")
    owner = memo.get(OWNER_MEMO) if isinstance(memo, dict) else None
    return owner if isinstance(owner, str) else None
