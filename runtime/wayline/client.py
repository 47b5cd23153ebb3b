"""``wayline.Client``: start runs, watch them, cancel them, resume hooks."""

from __future__ import annotations

import asyncio
import copy
import logging
import time
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Generic, ParamSpec, TypeVar, overload

from typing_extensions import deprecated

from ._core import limits, ordering, search_attributes
from ._core.cancels import cancels, stop_if_cancelled
from ._core.definitions import WorkflowDefinition, workflows_by_name
from ._core.events import RUN_TERMINAL_EVENTS, Event, EventType, NewEvent, RunStatus
from ._core.forks import fork_point, forked_data, forked_from, forked_history, parse_step
from ._core.ids import is_run_id, new_run_id
from ._core.messages import Wake, WakeReason
from ._core.projections import (
    Reversal,
    RunCompensationAbandoned,
    RunCompensationStuck,
    fold,
    is_sleep,
    payload,
    timeout_of,
)
from ._core.serde import decode, encode
from ._engine.ending import report_to_parent, terminate_children
from ._sdk.hooks import check_resume
from ._sdk.options import take_option_keywords
from ._sdk.streams import StreamChunk, follow_stream
from .durations import Duration, to_seconds
from .errors import (
    ConfigurationError,
    CorruptLogError,
    EntityConflictError,
    HookNotFoundError,
    HookWaitTimeoutError,
    InvalidPayloadError,
    ResultTimeoutError,
    RunAlreadyExistsError,
    RunCancelledError,
    RunFailedError,
    RunNotFoundError,
    RunTerminalError,
    SequenceConflictError,
    WaylineError,
    WorkflowNotFoundError,
    WrongNamespaceError,
)
from .settings import Settings
from .start_options import START_OPTION_NAMES, StartOptions
from .world import FLOW_TOPIC, HookInfo, RunInfo, World, flow_message, run_changes
from .world.business_ids import (
    IdConflictPolicy,
    IdReusePolicy,
    check_business_id,
    generation_run_id,
    may_start_anew,
    newest_generation,
)
from .world.cancel import ask_to_cancel
from .world.hook_buffer import MAX_BUFFER_SECONDS, BufferedPayload
from .world.pausing import pause_run, unpause_run
from .world.redriving import Redrive, redrive_run
from .world.registry import waiting_for_worker
from .world.sending import send
from .world.terminal_hints import TerminalHints

log = logging.getLogger("wayline.client")

P = ParamSpec("P")
R = TypeVar("R")


class RunHandle(Generic[R]):
    """A started run. ``R`` is its workflow's result type (``Any`` for a run found by id or
    started by name).

    ``id`` is what the handle was made with: the business id of a run started or looked up
    by one, else its run id. ``run_id`` is the run's ``wf_`` id; a handle that
    ``Client.handle`` made from a business id holds that id there until its first call
    resolves it to the newest run of that id, and then stays on that run, as a handle that
    ``start`` returned does.

    A run that continues as new (``wayline.continue_as_new``) is one link of a chain:
    ``first_run_id`` stays the run the handle was made for, while ``run_id`` moves on to the
    latest run of the chain that ``result`` (or a command) has seen. ``result`` follows the
    chain to its last run's outcome; ``cancel``, ``terminate``, ``pause`` and ``unpause`` act
    on the chain's latest run."""

    def __init__(
        self,
        client: Client,
        run_id: str,
        workflow: WorkflowDefinition[..., Any] | None,
        *,
        fresh: bool = False,
        id: str | None = None,
    ) -> None:
        self.client = client
        self.run_id = run_id
        self.id = id or run_id
        self._first: str | None = run_id if is_run_id(run_id) else None
        self._workflow = workflow
        self._fresh = fresh
        """Just created by ``start``: on a world that hears every end, its first ``result``
        call waits for the hint before it reads, unless the run may have ended since."""
        self._mark = client.ends.ends_mark()

    async def _run(self) -> str:
        """The run's id, resolved (once) when the handle was made from a business id."""
        if not is_run_id(self.run_id):
            self.run_id = await self.client.resolve(self.run_id)
        if self._first is None:
            self._first = self.run_id
        return self.run_id

    @property
    def first_run_id(self) -> str:
        """The run the handle was made for: the first of its chain that this handle knows
        (``run_id`` moves on when the run continues as new). A handle made from a business id
        holds that id here until its first call resolves it."""
        return self._first or self.run_id

    async def _latest(self) -> str:
        """The latest run of the chain, which ``run_id`` then names."""
        self.run_id = await self.client.latest_run(await self._run())
        return self.run_id

    async def status(self) -> RunStatus:
        return (await self.client.get_run(await self._run())).status

    async def events(self) -> list[Event]:
        return await self.client.world.list_events(await self._run())

    # The run's commands, as Temporal's and DBOS's handles have them: each is the Client
    # method of the same name, for this run.
    async def cancel(self, reason: str = "cancelled") -> bool:
        """:meth:`Client.cancel`: ask the run to stop (compensations run); False if it ended."""
        return await self.client.cancel(await self._latest(), reason)

    async def terminate(self, reason: str = "terminated") -> bool:
        """:meth:`Client.terminate`: end the run now, without compensations; False if it
        ended."""
        return await self.client.terminate(await self._latest(), reason)

    async def pause(self, reason: str = "paused") -> bool:
        """:meth:`Client.pause`: start nothing new until unpaused; False if paused already."""
        return await self.client.pause(await self._latest(), reason)

    async def unpause(self, reason: str = "unpaused") -> bool:
        """:meth:`Client.unpause`: let the paused run go on; False if it was not paused."""
        return await self.client.unpause(await self._latest(), reason)

    async def redrive(self, reason: str = "redriven", *, by: str = "client") -> Redrive:
        """:meth:`Client.redrive`: run this failed run again from its failed step, in place."""
        return await self.client.redrive(await self._latest(), reason, by=by)

    async def fork(
        self, from_step: str, *, occurrence: int | None = None, id: str | None = None
    ) -> RunHandle[Any]:
        """:meth:`Client.fork`: a new run from this one's log up to step ``from_step``."""
        return await self.client.fork(
            await self._run(), from_step=from_step, occurrence=occurrence, id=id
        )

    async def wake(self, wait: str | None = None) -> list[str]:
        """:meth:`Client.wake_up`: fire the run's pending sleeps (or the wait ``wait``) now."""
        return await self.client.wake_up(await self._run(), wait)

    async def resume(self) -> bool:
        """:meth:`Client.resume_compensation`: try the run's failed compensation again; True
        when this call recorded the resume, as the client answers (it returned None before,
        unlike every other command of the handle). A run with nothing to resume raises."""
        return await self.client.resume_compensation(await self._run())

    async def result(self, timeout: Duration | None = None) -> R:
        """The run's output; raises the run's failure (or cancellation). Raises
        :class:`ResultTimeoutError` after ``timeout`` (seconds, a ``timedelta`` or ``"10s"``;
        None waits for ever); a bad ``timeout`` raises ``ValueError`` before anything is read."""
        seconds = None if timeout is None else to_seconds(timeout)
        deadline = None if seconds is None else time.monotonic() + seconds
        await self._run()
        world = self.client.world
        # A world that hears of every terminal append, and wakes its waiters when one may
        # have been lost, is polled only as a safety net: every poll of a waiting run is a
        # read (polled from 50 ms growing to 1 s, 1,000 runs awaited at once were each read
        # about ten times).
        pause, longest = (1.0, 5.0) if world.terminal_hints else (0.002, 0.1)
        # A run this handle just started is not read before its hint (or the first pause)
        # comes: the read would find it running, one round trip for nothing. It is read at
        # once when it may have ended since the start: its hint heard (the run ended first),
        # too many ends heard since to be sure, or a hint lost.
        unread = (
            self._fresh
            and world.hears_every_end
            and not self.client.ends.may_have_ended_since(self.run_id, self._mark)
        )
        self._fresh = False
        handled = cancels()  # a cancel the caller caught before it asked does not end the wait
        followed = False
        while True:
            watched, soon = self.run_id, False
            ended = self.client.ends.watch(watched)
            try:
                if not unread:  # an end this world appended or read is not read again
                    # polled as cheaply as the world reads a run (on SQLite its row alone,
                    # not the whole log Client.get_run checks)
                    info = await world.known_end(watched) or await self._poll(watched, followed)
                    if info is not None and info.continued_as is not None:
                        # the chain goes on: its next run's end is the one to wait for
                        self.run_id, followed = info.continued_as, True
                        continue
                    if info is not None and info.status.terminal:
                        return self._outcome(info)
                    if deadline is not None and time.monotonic() >= deadline:
                        shown = "not created yet" if info is None else f"still {info.status}"
                        raise ResultTimeoutError(f"run {watched} {shown} after {seconds}s")
                    # a next run not created yet is, a moment after its predecessor's end
                    soon = info is None
                unread = False
                stop_if_cancelled(handled)  # a cancel the read swallowed ends the wait all the same
                wait = min(pause, _NEXT_RUN_POLL) if soon else pause
                wait = wait if deadline is None else min(wait, deadline - time.monotonic())
                await asyncio.wait({ended}, timeout=max(0.0, wait))
            finally:
                self.client.ends.unwatch(watched, ended)
            pause = min(longest, pause * 1.5)

    async def _poll(self, run_id: str, followed: bool) -> RunInfo | None:
        """The run's view for ``result``; None for a run of the chain (``followed``) that is
        not created yet: the end before it names it before its creation is written."""
        if followed:
            return await self.client.world.get_run(run_id)
        return await self.client._summary(run_id)

    def _outcome(self, info: RunInfo) -> R:
        if info.status is RunStatus.COMPLETED:
            hint = self._workflow.signature.return_hint if self._workflow else None
            output: R = decode(info.output, hint, what=f"result of run {self.run_id}")
            return output
        if info.status is RunStatus.FAILED:
            raise RunFailedError(error=info.error or {}, run_id=self.run_id)
        reason = (info.error or {}).get("message")
        said = f": {reason}" if reason and reason != "cancelled" else ""
        raise RunCancelledError(f"run {self.run_id} was cancelled{said}")


@dataclass(frozen=True, slots=True)
class Abandonment:
    """What ``Client.abandon_compensation`` did."""

    recorded: bool
    """True when this call recorded the abandon; False when the unwind had been abandoned
    already (nothing to do)."""
    not_run: tuple[Reversal, ...] | None
    """The reversals given up untried; None when the worker that parked the run did not
    list them."""


class Client:
    def __init__(
        self,
        world: World,
        workflows: list[WorkflowDefinition[..., Any]] | None = None,
        *,
        settings: Settings | None = None,
        namespace: str | None = None,
    ) -> None:
        """With ``namespace`` (as a Temporal client's, a property of the client, not of each
        call) every run this client starts records it (``run_created``, and its children
        inherit it), and this client resumes only hooks of runs recorded in it: the operator
        answers a namespace's WorkflowHooks through such a client. Without one, a client
        starts runs of no namespace and resumes any hook: access to the world is access to
        all of it."""
        self.world = world
        self.ends = TerminalHints.of(world)
        """What this process heard of runs' ends, and who waits for one (a result): the
        world only tells it what it hears; every client of one world shares it."""
        self.namespace = namespace or None
        self._workflows = workflows_by_name(workflows or [])
        self._limits = (settings or Settings.from_env()).limits
        self.import_types = True
        """Whether a typed hook's resume may import the module its recorded type names, to
        validate the payload with the class; a console's client (:meth:`without_type_imports`)
        may not: it looks only in modules already imported, else checks the recorded shape."""

    def without_type_imports(self) -> Client:
        """This client (the same world, namespace and limits) for a process that serves what
        a log names, as a console does: a hook's recorded type is looked for only in modules
        already imported, never imported by its name, since any writer of the log chooses it
        and importing a module runs its code."""
        other = copy.copy(self)
        other.import_types = False
        return other

    @overload
    async def start(
        self, workflow: WorkflowDefinition[P, R], /, *args: P.args, **kwargs: P.kwargs
    ) -> RunHandle[R]: ...
    @overload
    @deprecated("start(wf, ..., run_id=) is deprecated: use start_with(StartOptions(run_id=), wf)")
    async def start(
        self,
        workflow: WorkflowDefinition[..., R],
        /,
        *args: Any,
        run_id: str,
        id_conflict: IdConflictPolicy = "use_existing",
        queue: str | None = None,
        **kwargs: Any,
    ) -> RunHandle[R]: ...
    @overload
    @deprecated("start(wf, ..., id=) is deprecated: use start_with(StartOptions(id=), wf)")
    async def start(
        self,
        workflow: WorkflowDefinition[..., R],
        /,
        *args: Any,
        id: str,
        id_conflict: IdConflictPolicy = "use_existing",
        id_reuse: IdReusePolicy = "reject_duplicate",
        queue: str | None = None,
        **kwargs: Any,
    ) -> RunHandle[R]: ...
    @overload
    @deprecated("start(wf, ..., queue=) is deprecated: use start_with(StartOptions(queue=), wf)")
    async def start(
        self, workflow: WorkflowDefinition[..., R], /, *args: Any, queue: str, **kwargs: Any
    ) -> RunHandle[R]: ...
    @overload
    @deprecated(
        "start(name, ..., run_id=) is deprecated: use start_with(StartOptions(run_id=), name)"
    )
    async def start(
        self, workflow: str, /, *args: Any, run_id: str, **kwargs: Any
    ) -> RunHandle[Any]: ...
    @overload
    @deprecated("start(name, ..., id=) is deprecated: use start_with(StartOptions(id=), name)")
    async def start(
        self, workflow: str, /, *args: Any, id: str, **kwargs: Any
    ) -> RunHandle[Any]: ...
    @overload
    @deprecated(
        "start(name, ..., queue=) is deprecated: use start_with(StartOptions(queue=), name)"
    )
    async def start(
        self, workflow: str, /, *args: Any, queue: str, **kwargs: Any
    ) -> RunHandle[Any]: ...
    @overload
    async def start(self, workflow: str, /, *args: Any, **kwargs: Any) -> RunHandle[Any]: ...
    async def start(
        self, workflow: WorkflowDefinition[..., Any] | str, /, *args: Any, **kwargs: Any
    ) -> RunHandle[Any]:
        """Start a run of ``workflow`` (a definition, or a workflow's name) with the
        workflow's own arguments; :meth:`start_with` starts one with options.

        Deprecated: the options given as keywords here (``run_id``, ``id``, ``id_conflict``,
        ``id_reuse``, ``queue``), which :meth:`start_with` takes as :class:`StartOptions`.
        Such a keyword still acts as the option, with a ``DeprecationWarning``, unless the
        workflow has a parameter of that name: then it is the workflow's argument."""
        definition = self._definition(workflow)
        given = take_option_keywords(
            definition,
            kwargs,
            START_OPTION_NAMES,
            call="Client.start",
            new_form="Client.start_with(wayline.StartOptions(...), workflow, ...)",
            stacklevel=2,
            unknown=("run_id", "queue"),  # the options start took before business ids
        )
        return await self._start(StartOptions(**given), workflow, definition, args, kwargs)

    @overload
    async def start_with(
        self,
        options: StartOptions,
        workflow: WorkflowDefinition[P, R],
        /,
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> RunHandle[R]: ...
    @overload
    async def start_with(
        self, options: StartOptions, workflow: str, /, *args: Any, **kwargs: Any
    ) -> RunHandle[Any]: ...
    async def start_with(
        self,
        options: StartOptions,
        workflow: WorkflowDefinition[..., Any] | str,
        /,
        *args: Any,
        **kwargs: Any,
    ) -> RunHandle[Any]:
        """Start a run of ``workflow`` as ``options`` say (see :class:`StartOptions`: an id,
        a run id, a queue); every argument after ``workflow`` is the workflow's own."""
        if not isinstance(options, StartOptions):
            raise TypeError(f"start_with takes a wayline.StartOptions first, not {options!r}")
        return await self._start(options, workflow, self._definition(workflow), args, kwargs)

    def _definition(
        self, workflow: WorkflowDefinition[..., Any] | str
    ) -> WorkflowDefinition[..., Any] | None:
        """The definition of ``workflow``; None for a name this client was not given."""
        if not isinstance(workflow, str):
            return workflow
        definition = self._workflows.get(workflow)
        if definition is None and self._workflows:
            known = ", ".join(sorted(self._workflows)) or "none"
            raise WorkflowNotFoundError(f"unknown workflow {workflow!r} (known: {known})")
        return definition

    async def _start(
        self,
        options: StartOptions,
        workflow: WorkflowDefinition[..., Any] | str,
        definition: WorkflowDefinition[..., Any] | None,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
    ) -> RunHandle[Any]:
        name = workflow if isinstance(workflow, str) else workflow.name
        if definition is not None:
            # the check `wayline start` makes: a bad input is refused here, not by a run
            # that fails on a worker (SERIALIZATION_ERROR) after it was written
            stored = definition.encode_input(args, kwargs, limits=self._limits)
        else:
            stored = {"args": encode(list(args), what=f"workflow {name!r} arguments")}
            if kwargs:
                stored["kwargs"] = encode(kwargs, what=f"workflow {name!r} arguments")
            limits.check(stored, "input", f"the input of workflow {name!r}", self._limits)
        data: dict[str, Any] = {"workflow": name, "input": stored}
        if options.queue:
            data["queue"] = options.queue
        if self.namespace:
            data["namespace"] = self.namespace
        if options.id is not None:
            data["businessId"] = options.id
        if options.memo:
            data["memo"] = dict(options.memo)
        data.update(
            ordering.record_fields(
                ordering.Ordering(
                    options.priority, options.fairness_key or "", options.fairness_weight
                )
            )
        )
        if definition is not None:
            data["revision"] = definition.revision
            data["definition"] = definition.identity_record()
        search = {
            **(definition.attributes if definition is not None else {}),
            **search_attributes.encode(options.attributes or {}),
        }
        if search:
            data[search_attributes.SEARCH_KEY] = search_attributes.checked_count(search)
        start = _Start(
            name,
            definition,
            data,
            options.id_conflict,
            options.id,
            {token: self._plain(token, value) for token, value in options.hooks.items()},
            to_seconds(options.hooks_buffer),
        )
        if definition is not None and definition.debounce is not None:
            if options.id is not None or options.run_id is not None:
                raise ConfigurationError(
                    f"workflow {name!r} is debounced: its runs are named by its Debounce key, "
                    "so a start takes no id"
                )
            return await self._start_debounced(definition, start, args, kwargs)
        if options.id is None:
            run_id = options.run_id or new_run_id()
            if await self._create(run_id, start):
                return await self._send_start(run_id, start, fresh=True)
            return await self._existing(await self.get_run(run_id), start)
        return await self._start_by_id(options.id, start, options.id_reuse)

    async def _start_debounced(
        self,
        definition: WorkflowDefinition[..., Any],
        start: _Start,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
    ) -> RunHandle[Any]:
        """The handle of the run of this start's debounce key that has not begun, its input
        replaced by this start's (``run_debounced``), or of a new such run whose start message
        is due after the quiet period (``wayline.Debounce``). The runs of a key are the
        generations of the business id ``debounce:<key>``; the world refuses ``run_debounced``
        once the run began, and that start makes the next generation."""
        debounce = definition.debounce
        assert debounce is not None
        key = debounce.key_for(definition.name, list(args), kwargs)
        chain = f"debounce:{key}"
        start.data["debounce"] = {"key": key, "period": debounce.seconds}
        replaced = NewEvent(EventType.RUN_DEBOUNCED, data={"input": start.data["input"]})
        generation = await newest_generation(self.world, chain, self.namespace)
        for _ in range(_FENCE_ROUNDS):
            if generation >= 0:
                run_id = generation_run_id(chain, self.namespace, generation)
                info = await self.world.get_run(run_id)
                if info is not None and _not_begun(info):
                    try:
                        await self.world.append(run_id, [replaced], expected_seq=info.last_seq)
                    except SequenceConflictError:
                        continue  # another start (or the run's begin) came first: read again
                    except (EntityConflictError, RunTerminalError):
                        pass  # it began or ended meanwhile: this start makes the next run
                    else:
                        return RunHandle(self, run_id, definition)
            run_id = generation_run_id(chain, self.namespace, generation + 1)
            if await self._create(run_id, start):
                await send(
                    self.world,
                    FLOW_TOPIC,
                    {
                        **flow_message(self.world, run_id, WakeReason.START, after_own_append=True),
                        **ordering.of_record(start.data).fields(),
                    },
                    idempotency_key=f"{run_id}:start",
                    delay_seconds=debounce.seconds,
                    recoverable=True,
                )
                return RunHandle(self, run_id, definition, fresh=True)
            generation = await newest_generation(self.world, chain, self.namespace, generation + 1)
        raise SequenceConflictError(
            f"debounce key {key!r} kept gaining runs under {_FENCE_ROUNDS} attempts", last_seq=0
        )

    async def _start_by_id(self, id: str, start: _Start, id_reuse: str) -> RunHandle[Any]:
        """Start a new generation of business id ``id``, or apply the policies to its newest.
        Two starters racing for generation n+1 both append its ``run_created`` expecting an
        empty log: one wins, and the other finds the winner's run as the newest and applies
        the policies to it (``use_existing``: the winner's handle)."""
        generation = await newest_generation(self.world, id, self.namespace)
        for _ in range(_FENCE_ROUNDS):
            if generation >= 0:
                newest = await self.get_run(generation_run_id(id, self.namespace, generation))
                # A run that continued as new is one whose next generation is due: its chain
                # is live, and a start here would take the generation its continuation needs.
                if not (newest.status.terminal and may_start_anew(id_reuse, newest.status)):
                    return await self._existing(newest, start)
            run_id = generation_run_id(id, self.namespace, generation + 1)
            if await self._create(run_id, start):
                return await self._send_start(run_id, start, fresh=True)
            generation = await newest_generation(self.world, id, self.namespace, generation + 1)
        raise SequenceConflictError(
            f"id {id!r} kept gaining runs under {_FENCE_ROUNDS} attempts to start one", last_seq=0
        )

    async def fork(
        self,
        run_id: str,
        *,
        from_step: str,
        occurrence: int | None = None,
        id: str | None = None,
    ) -> RunHandle[Any]:
        """Start a new run of the same workflow and input whose log is run ``run_id``'s up to
        the first attempt of step ``from_step`` (``NAME`` or ``NAME#N``, the Nth call of that
        name counted from 1; ``occurrence`` says N apart): what was recorded before it is
        reused, and that step and every later one run again with the code the workers run
        now. The new run gets a fresh run id, or business id ``id`` (as ``StartOptions(id=)``:
        refused while a live run holds it), and records the link (``forked_from`` of its
        ``RunInfo``). The old run is only read, so a live one may be forked. Raises
        :class:`ForkRefusedError`, creating nothing, for a step or occurrence the run has not
        called (naming those it has) or a hook or child before it still open; the steps
        re-run keep the idempotency keys they had in the old run (docs/day2.md, "Fork and
        redrive")."""
        old = await self.get_run(run_id)
        events = await self.world.list_events(old.run_id)
        step, nth = parse_step(from_step)
        point = fork_point(old.run_id, events, step, nth if occurrence is None else occurrence)
        created = events[0].data if events and events[0].type is EventType.RUN_CREATED else {}
        if id is not None:
            check_business_id(id)
        data = forked_data(created, old.run_id, point, id)
        # A debounced run ran the input of its last start (``run_debounced``), not its first.
        replaced = [e for e in events if e.type is EventType.RUN_DEBOUNCED]
        if replaced:
            data["input"] = replaced[-1].data.get("input")
        # The fork runs the code the workers run now: the definition this client was given
        # for the workflow, else none (a worker serving the name drives it, as one started
        # by name whose start pins nothing).
        data.pop("definition", None)
        data.pop("revision", None)
        definition = self._workflows.get(old.workflow)
        if definition is not None:
            data["revision"] = definition.revision
            data["definition"] = definition.identity_record()
        if self.namespace:
            data["namespace"] = self.namespace
        else:
            data.pop("namespace", None)
        ended = old.status.terminal
        history = forked_history(old.run_id, events, point, data, None, ended=ended)
        start = _Start(old.workflow, definition, data, "fail", id, history=tuple(history[1:]))
        if id is not None:
            return await self._start_by_id(id, start, "allow_duplicate")
        new_id = new_run_id()
        if not await self._create(new_id, start):  # pragma: no cover - a fresh id is unique
            raise RunAlreadyExistsError(f"run {new_id} exists already", run_id=new_id, status="")
        return await self._send_start(new_id, start, fresh=True)

    async def forks_of(self, run_id: str, limit: int = 1000) -> list[RunInfo]:
        """The runs forked from ``run_id``, oldest first, among the newest ``limit`` runs of
        its workflow (a fork records its link in its own log; the old run is never
        written)."""
        old = await self.get_run(run_id)
        found = [
            info
            for info in await self.world.list_runs(workflow=old.workflow, limit=limit)
            if (forked_from(info.attributes) or {}).get("runId") == old.run_id
        ]
        return sorted(found, key=lambda info: info.created_at)

    async def _create(self, run_id: str, start: _Start) -> bool:
        """Append the run's ``run_created`` as its first event; False when it exists already.
        The payloads of ``StartOptions(hooks=)`` are stored first, for this run id alone, so
        that no hook of the run can be created before them. A start that finds the run
        existing stores nothing here: ``_existing`` decides whether the run it found gets
        them (a live run under ``use_existing``, as a signal-with-start signals the run it
        finds) or the start is refused and nothing is stored."""
        if start.hooks and await self.world.get_run(run_id) is not None:
            return False
        await self._store_start_hooks(run_id, start)
        event = NewEvent(EventType.RUN_CREATED, data=start.data)
        try:
            await self.world.append(run_id, [event, *start.history], expected_seq=0)
        except (EntityConflictError, SequenceConflictError):
            return False
        return True

    async def _store_start_hooks(self, run_id: str, start: _Start) -> None:
        now = self.world.now()
        for token, plain in start.hooks.items():
            entry = BufferedPayload(
                self.namespace or "",
                token,
                f"start:{run_id}:{token}",  # a repeated start stores it once
                plain,
                now,
                now + start.hooks_seconds,
                for_run=run_id,
            )
            await self.world.hook_buffer().store(entry)

    async def _existing(self, existing: RunInfo, start: _Start) -> RunHandle[Any]:
        """The answer to a start that found ``existing`` under its id and starts no run."""
        run_id = existing.run_id
        named = "" if start.business_id is None else f" (id {start.business_id!r})"
        if existing.workflow != start.name:
            raise RunAlreadyExistsError(
                f"run {run_id}{named} exists already, for workflow {existing.workflow!r}",
                run_id=run_id,
                status=str(existing.status),
                business_id=start.business_id,
            )
        if start.id_conflict == "fail":
            raise RunAlreadyExistsError(
                f"run {run_id}{named} exists already ({existing.status})",
                run_id=run_id,
                status=str(existing.status),
                business_id=start.business_id,
            )
        if existing.status.terminal:
            # it ended (maybe long ago): a start would wake no one (a run started here has
            # no parent to report to), and outside the queue's dedup window it is one
            # more message per repeat, e.g. each time the operator's start handler runs
            # again for a WorkflowRun whose status was emptied
            return RunHandle(self, run_id, start.definition, id=start.business_id)
        if start.hooks:  # signal-with-start of a live run: its hooks get them, waiting or not
            await self._store_start_hooks(run_id, start)
            for token in start.hooks:
                await self.deliver_buffered(token)
        return await self._send_start(run_id, start, fresh=False)

    async def _send_start(self, run_id: str, start: _Start, *, fresh: bool) -> RunHandle[Any]:
        # recoverable: run_created is durable, and a worker re-arms a live run that lost its
        # start: when it starts (Worker.recover_runs), and while it runs (a starter that died
        # between these two writes: _engine.lost_starts, under this same key)
        message = flow_message(self.world, run_id, WakeReason.START, after_own_append=fresh)
        await send(
            self.world,
            FLOW_TOPIC,
            {**message, **ordering.of_record(start.data).fields()},
            idempotency_key=f"{run_id}:start",
            recoverable=True,
        )
        return RunHandle(self, run_id, start.definition, fresh=fresh, id=start.business_id)

    async def resolve(self, id: str) -> str:
        """The run id that ``id`` names: ``id`` itself when it is a run id (``wf_`` and 32
        lowercase hex digits), else the newest run started under business id ``id`` by a
        client of this client's namespace. Every call that takes a run id resolves it so.
        Raises :class:`RunNotFoundError` when no run has that id, :class:`InvalidIdError`
        for an id no run can have. Finding a business id's newest run reads each of its runs
        once (one read for an id started once)."""
        if is_run_id(id):
            return id
        check_business_id(id)
        generation = await newest_generation(self.world, id, self.namespace)
        if generation < 0:
            raise RunNotFoundError(f"no run {id!r}")
        return generation_run_id(id, self.namespace, generation)

    @overload
    def handle(self, workflow: WorkflowDefinition[..., R], run_id: str, /) -> RunHandle[R]: ...
    @overload
    def handle(self, run_id: str, /) -> RunHandle[Any]: ...
    def handle(self, *args: Any) -> RunHandle[Any]:
        """A handle on a run by id: a run id, or a business id, which the handle's first call
        resolves to the newest run of that id (see :meth:`resolve`). Given the run's workflow
        first, its ``result`` is typed and decoded as the workflow's result type, as a started
        run's is."""
        if len(args) == 1 and isinstance(args[0], str):
            return RunHandle(self, args[0], None)
        if len(args) == 2 and isinstance(args[0], WorkflowDefinition):
            return RunHandle(self, args[1], args[0])
        raise TypeError(f"Client.handle takes (run_id) or (workflow, run_id), not {args!r}")

    async def get_run(self, run_id: str) -> RunInfo:
        """The run as its log has it (``run_id``: a run id or a business id, see
        :meth:`resolve`). Raises :class:`CorruptLogError` when an entry of the
        log does not read, wherever it is: on a world whose ``get_run`` reads a summary row
        (SQLite) the log is read too, so a damaged entry inside an ended run's log is not
        hidden behind the status its row kept."""
        run_id = await self.resolve(run_id)
        info = await self._summary(run_id)
        await self._check_log(run_id)
        return info

    async def _check_log(self, run_id: str) -> None:
        """Raise the run's ``CorruptLogError`` where reading its summary did not read its log."""
        if not self.world.get_run_reads_log:
            await self.world.list_events(run_id)

    async def _summary(self, run_id: str) -> RunInfo:
        """The world's view of the run as cheaply as it gives it (what a poll reads)."""
        info = await self.world.get_run(run_id)
        if info is None:
            raise RunNotFoundError(f"no run {run_id}")
        return info

    async def waiting_for_worker(self, run: RunInfo | str) -> str | None:
        """Why no live worker can drive the run (``waiting_for_worker: ...`` naming its
        workflow, identity and queue), or None when one can or the run has ended."""
        info = run if isinstance(run, RunInfo) else await self.get_run(run)
        if info.status.terminal:
            return None
        return waiting_for_worker(info, await self.world.list_served(), self.world.now())

    async def list_served(self) -> list[dict[str, Any]]:
        """What workers serve: one entry per definition a worker ever served (``workflow``,
        ``identity``, ``revision``, ``queue``), with the workers serving it now (``workers``:
        worker id to the time it is live until), when one was last heard (``seenAt``), and
        ``live``: whether a worker serves it now, by the world's clock."""
        now = self.world.now()
        return [
            {**entry, "live": float(entry.get("liveUntil", 0)) >= now}
            for entry in await self.world.list_served()
        ]

    async def runs_waiting_for_worker(self, limit: int = 10_000) -> list[tuple[RunInfo, str]]:
        """The live runs among the newest ``limit`` that no live worker can drive, each with
        why (as :meth:`waiting_for_worker` says it), newest first."""
        served, now = await self.world.list_served(), self.world.now()
        found = []
        for info in await self.world.list_runs(limit=limit):
            why = waiting_for_worker(info, served, now)
            if why is not None:
                found.append((info, why))
        return found

    async def list_runs(
        self,
        status: RunStatus | str | None = None,
        limit: int = 100,
        *,
        where: str | Sequence[str] | None = None,
        since: Duration | datetime | None = None,
        workflow: str | None = None,
    ) -> list[RunInfo]:
        """Runs, newest first. ``where``: one expression or several, all of which hold
        (``"tenant=acme"``, ``"amount>100"``; docs/sdk.md, "Search attributes"), answered
        from the world's attribute index; ``since``: created in the last duration (``"1h"``)
        or after a datetime; ``workflow``: of that workflow. A bad expression raises
        :class:`InvalidQueryError` before anything is read."""
        clauses = search_attributes.parse_all(where)
        if isinstance(since, datetime):
            if since.tzinfo is None:
                raise ValueError("since= needs a timezone-aware datetime")
            after: float | None = since.timestamp()
        else:
            after = None if since is None else self.world.now() - to_seconds(since)
        return await self.world.list_runs(
            status=RunStatus(status) if status is not None else None,
            workflow=workflow,
            limit=limit,
            where=clauses,
            since=after,
        )

    async def runs_page(
        self,
        after: tuple[float, str] | None,
        limit: int = 100,
        *,
        status: RunStatus | str | None = None,
        where: str | Sequence[str] | None = None,
        workflow: str | None = None,
    ) -> list[RunInfo]:
        """The runs :meth:`list_runs` would list, from just past ``after``: the
        ``(created_at, run_id)`` of the last run of the page before (None: the first page).
        A page deep in the list costs what the first one does where the world has an index
        (SQLite), instead of reading every run before it."""
        return await self.world.runs_page(
            after=after,
            limit=limit,
            status=RunStatus(status) if status is not None else None,
            workflow=workflow,
            where=search_attributes.parse_all(where),
        )

    async def count_runs(
        self, *, where: str | Sequence[str] | None = None, workflow: str | None = None
    ) -> dict[str, int]:
        """How many runs of the world (of ``workflow``, matching ``where``) have each status,
        counted over every run: ``{"completed": 90, "pending": 10}``."""
        counts = await self.world.count_runs(
            workflow=workflow, where=search_attributes.parse_all(where)
        )
        return {str(status): n for status, n in counts.items()}

    async def cancel(self, run_id: str, reason: str = "cancelled") -> bool:
        """Ask a run to stop; False when it had already ended. A worker then stops it, runs
        its compensations (if any) and records ``run_cancelled``. Running step bodies are not
        interrupted, but nothing new starts. Asking twice (or concurrently) records one
        request. A run that continued as new is followed to the latest run of its chain,
        which is asked (also when it continues while it is asked)."""
        run_id = (await self.get_run(run_id)).run_id
        while True:
            run_id = await self.latest_run(run_id)
            if await ask_to_cancel(self.world, run_id, reason, _FENCE_ROUNDS):
                return True
            if await self.latest_run(run_id) == run_id:
                return False

    async def latest_run(self, run_id: str) -> str:
        """The latest run of ``run_id``'s chain: ``run_id`` itself unless it continued as new
        (``wayline.continue_as_new``), else its next run's latest, as far as it is created.
        One read per run of the chain from ``run_id`` on."""
        for _ in range(_CHAIN_READS):
            info = await self.world.known_end(run_id) or await self.world.get_run(run_id)
            following = None if info is None else info.continued_as
            if following is None or await self.world.get_run(following) is None:
                return run_id  # the end (or the next run not created yet: its start is due)
            run_id = following
        raise WaylineError(f"run {run_id}'s chain is longer than {_CHAIN_READS} runs from here")

    async def pause(self, run_id: str, reason: str = "paused", *, by: str = "client") -> bool:
        """Pause a pending or running run: it starts no new step, child, hook or sleep until
        :meth:`unpause`. A step body already running finishes and records its result; a sleep
        that falls due meanwhile fires on the unpause. The log records who asked and
        ``reason``. False when the run was paused already (nothing recorded). Raises
        ``RunTerminalError`` for a run that has ended, and ``WaylineError`` for one that is
        blocked, being compensated or being cancelled. A cancel of a paused run cancels it.
        ``by`` names who asked, in the log and the run's status (the operator says
        ``operator``)."""
        run_id = (await self.get_run(run_id)).run_id
        return await pause_run(self.world, run_id, reason, by, _FENCE_ROUNDS)

    async def unpause(self, run_id: str, reason: str = "unpaused", *, by: str = "client") -> bool:
        """Lift a run's pause and wake it: it goes on from where it stopped (a step paused by
        ``on_exhausted="pause"`` starts again with a fresh retry budget). False when the run
        was not paused (nothing recorded). Raises ``RunTerminalError`` for a run that has
        ended."""
        run_id = (await self.get_run(run_id)).run_id
        return await unpause_run(self.world, run_id, reason, by, _FENCE_ROUNDS)

    async def redrive(
        self,
        run_id: str,
        reason: str = "redriven",
        *,
        by: str = "client",
        dry_run: bool = False,
    ) -> Redrive:
        """Re-drive a failed run in place from its failed step: the run is running again, the
        step runs again with a fresh attempt budget (numbered from 1) and the idempotency key
        of its first attempt, and the steps that completed before it keep their results. The
        log records ``by`` (who asked), ``reason`` and the step. Returns the run and the step;
        ``dry_run`` checks and records nothing. Raises :class:`RedriveRefusedError`, recording
        nothing, for a run that has not failed, failed outside a step, ran its compensations,
        is a child, has a hook or child still open, or whose definition identity no live
        worker serves (docs/day2.md, "Fork and redrive")."""
        run_id = (await self.get_run(run_id)).run_id
        return await redrive_run(self.world, run_id, reason, by, _FENCE_ROUNDS, dry_run=dry_run)

    async def _fenced_append(
        self, run_id: str, decide: Callable[[list[Event]], list[NewEvent] | None]
    ) -> list[Event]:
        """Read the run's log, decide, and append only if the log has not moved since the
        read (expected sequence); on a conflict read what was added and decide again. So a
        check and the append it allows are one write even with concurrent callers. Returns
        what was appended (nothing when ``decide`` found it already done)."""
        events = await self.world.list_events(run_id)
        for _ in range(_FENCE_ROUNDS):
            batch = decide(events)
            if not batch:
                return []
            if events and events[-1].type in RUN_TERMINAL_EVENTS:
                raise RunTerminalError(f"run {run_id} has ended")
            last = events[-1].seq if events else 0
            try:
                return await self.world.append(run_id, batch, expected_seq=last)
            except SequenceConflictError:
                events += await self.world.list_events(run_id, after_seq=last)
        raise SequenceConflictError(
            f"run {run_id} kept moving under {_FENCE_ROUNDS} attempts to append", last_seq=0
        )

    async def repair_run(self, run_id: str, drop_seq: int | None = None) -> list[str]:
        """Remove a run's unreadable log entry (see :class:`CorruptLogError`) and wake the run
        so it continues from its log. Returns what was done."""
        run_id = await self.resolve(run_id)
        done = await self.world.repair_run(run_id, drop_seq)
        info = await self.world.get_run(run_id)
        if info is None:  # its only entries were removed: a run without events does not exist
            return done
        if not info.status.terminal:
            await send(self.world, FLOW_TOPIC, Wake(run_id, WakeReason.REPAIR).to_wire())
            done.append("woke the run")
        parent = info.attributes.get("parent")
        if isinstance(parent, dict) and parent.get("runId"):
            # a parent that could not reach this run while it was fenced (a cancel it could
            # not pass on, an end it could not hear) asks again on this wake
            await send(
                self.world, FLOW_TOPIC, Wake(str(parent["runId"]), WakeReason.CHILD).to_wire()
            )
            done.append(f"woke its parent run {parent['runId']}")
        return done

    async def terminate(self, run_id: str, reason: str = "terminated") -> bool:
        """Stop a run now, without its compensations (as ``temporal workflow terminate``): it
        ends ``cancelled`` at once, with ``terminated: true`` in its last event. False when it
        had already ended. A step body running somewhere finishes, but its result is refused;
        a parent waiting on this run hears of its end, and its children still running are
        terminated too (as Temporal's default parent-close policy)."""
        info = await self.get_run(run_id)
        run_id = info.run_id
        try:
            await self.world.append(
                run_id,
                [NewEvent(EventType.RUN_CANCELLED, data={"reason": reason, "terminated": True})],
            )
        except RunTerminalError:
            return False
        await terminate_children(self.world, run_id, "terminated")
        parent = info.attributes.get("parent")
        if isinstance(parent, dict) and parent.get("runId") and parent.get("cid"):
            report = {
                "status": str(RunStatus.CANCELLED),
                "childRunId": run_id,
                "error": {"code": "RUN_CANCELLED", "message": reason},
            }
            try:
                await self.world.append(
                    str(parent["runId"]),
                    [NewEvent(EventType.CHILD_COMPLETED, str(parent["cid"]), report)],
                )
            except WaylineError:
                pass  # reported already, or the parent ended or is gone
            else:
                await send(
                    self.world, FLOW_TOPIC, Wake(parent["runId"], WakeReason.CHILD).to_wire()
                )
        return True

    async def open_hooks(self, run_id: str | None = None) -> list[dict[str, Any]]:
        """The hooks of live runs that hold a token (or one run's): ``{token, runId, workflow,
        hookId, status, createdAt, timeoutAt, type, shape, metadata}``, oldest first. ``status`` is
        ``waiting``, or ``received`` for a hook that had its first payload and keeps its token
        until it is disposed or its run ends (later payloads are for ``async for``). Reads
        each live run's log (its one fold); a run whose log does not read is left out of the
        list of all (logged), not of its own."""
        if run_id is not None:
            runs = [await self.get_run(run_id)]
            run_id = runs[0].run_id
        else:
            runs = [r for r in await self.world.list_runs(limit=100_000) if not r.status.terminal]
        found: list[dict[str, Any]] = []
        for info in runs:
            if info.status.terminal:
                continue
            try:
                events = await self.world.list_events(info.run_id)
            except CorruptLogError as err:  # fences its own run, not every other run's hooks
                if run_id is not None:
                    raise
                log.warning("hooks of run %s left out: %s", info.run_id, err.message)
                continue
            view = fold(info.run_id, events)
            found += [
                {
                    "token": hook.token,
                    "runId": info.run_id,
                    "workflow": info.workflow,
                    "hookId": hook.cid,
                    "status": hook.status,
                    "createdAt": hook.created_at,
                    "timeoutAt": hook.timeout_at,
                    "type": hook.type,
                    "shape": hook.shape,
                    "metadata": hook.metadata,
                }
                for hook in view.hooks.values()
                if hook.cid in view.open and hook.status in ("waiting", "received")
            ]
        return sorted(found, key=lambda h: h["createdAt"])

    async def fail(self, run_id: str, reason: str = "failed by request") -> bool:
        """End a live run ``failed`` now (``TERMINATED``), without running its compensations:
        the explicit end for a run that cannot go on, such as one blocked by a replay
        divergence that no rollback will rescue. Bodies still running are not interrupted;
        their results are dropped; its children still running are terminated. False when the
        run had already ended."""
        run_id = (await self.get_run(run_id)).run_id
        error = {"name": "WaylineError", "code": "TERMINATED", "message": reason}
        try:
            await self.world.append(
                run_id, [NewEvent(EventType.RUN_FAILED, data={"error": error, "by": "client"})]
            )
        except RunTerminalError:
            return False
        await terminate_children(self.world, run_id, "failed")
        await report_to_parent(self.world, await self.get_run(run_id))
        return True

    async def resume_compensation(self, run_id: str) -> bool:
        """Try a failed compensation again (the run is ``compensation_stuck``)."""
        recorded, _ = await self._unwind_command(run_id, EventType.RUN_COMPENSATION_RESUMED)
        return recorded

    async def abandon_compensation(self, run_id: str) -> Abandonment:
        """Give up the unwind of a ``compensation_stuck`` run; it ends failed or cancelled.
        The answer says whether this call recorded the abandon (False when the unwind had
        been abandoned already: the same answer again, nothing recorded) and which reversals
        are given up without being tried (latest first, the failed one not among them), as
        the worker that parked the run listed them; None when the park did not list them (a
        worker of a version before the list). A second abandon names the same list."""
        recorded, not_run = await self._unwind_command(run_id, EventType.RUN_COMPENSATION_ABANDONED)
        return Abandonment(recorded, not_run)

    async def _unwind_command(
        self, run_id: str, event: EventType
    ) -> tuple[bool, tuple[Reversal, ...] | None]:
        verb = "resume" if event is EventType.RUN_COMPENSATION_RESUMED else "abandon"
        run_id = (await self.get_run(run_id)).run_id
        not_run: tuple[Reversal, ...] | None = None

        def decide(events: list[Event]) -> list[NewEvent] | None:
            nonlocal not_run
            status, abandoned = RunStatus.PENDING, False
            for e in events:
                status = _phase(e, status)
                p = payload(e) if e.type in _UNWIND_COMMAND_EVENTS else None
                if isinstance(p, RunCompensationStuck):
                    abandoned, not_run = False, p.not_run
                elif isinstance(p, RunCompensationAbandoned):
                    abandoned = True  # the run stays parked until a worker ends it
                    not_run = p.not_run
            if abandoned and status is RunStatus.COMPENSATION_STUCK:
                # one answer per park: an abandoned unwind is not resumed behind the back of
                # the person who gave it up (a second abandon is that same answer again)
                if event is EventType.RUN_COMPENSATION_ABANDONED:
                    return None
                raise WaylineError(
                    f"run {run_id}: its compensation was abandoned; nothing to {verb}"
                )
            if status is not RunStatus.COMPENSATION_STUCK:
                raise WaylineError(
                    f"run {run_id} is {status}, not compensation_stuck; nothing to {verb}"
                )
            if event is EventType.RUN_COMPENSATION_ABANDONED and not_run is not None:
                return [NewEvent(event, data={"notRun": [r.to_json() for r in not_run]})]
            return [NewEvent(event)]

        try:
            appended = await self._fenced_append(run_id, decide)
        except (RunTerminalError, EntityConflictError) as err:
            raise WaylineError(f"run {run_id}: {err}") from err
        await send(self.world, FLOW_TOPIC, Wake(run_id, WakeReason(str(event))).to_wire())
        return bool(appended), not_run

    @overload
    async def resume_hook(
        self,
        token: str,
        payload: Any = None,
        *,
        delivery_id: str | None = None,
        buffer: None = None,
        once: bool = False,
    ) -> str: ...
    @overload
    async def resume_hook(
        self,
        token: str,
        payload: Any = None,
        *,
        delivery_id: str | None = None,
        buffer: Duration | None,
        once: bool = False,
    ) -> str | None: ...
    async def resume_hook(
        self,
        token: str,
        payload: Any = None,
        *,
        delivery_id: str | None = None,
        buffer: Duration | None = None,
        once: bool = False,
    ) -> str | None:
        """Deliver ``payload`` to the hook holding ``token``; returns the run id. With
        ``delivery_id`` the call is idempotent, also under concurrency: a payload already
        delivered under that id (a caller retrying after a crash, or a second caller racing
        the first) is not delivered again.

        With ``buffer`` (a duration: seconds, a ``timedelta`` or ``"10m"``, at most a week),
        a token that no hook holds yet is no error: the payload is stored for that long, and
        the first hook that a run of this client's namespace creates for the token receives
        it at once, exactly once. Returns None when the payload was stored, the run id when
        it reached a hook now. One payload waits per token: a second one under another
        delivery id raises :class:`HookBufferOccupiedError` (docs/day2.md).

        With ``once`` (a webhook's delivery) only the hook's first payload is taken: a hook
        that received one already refuses another with :class:`HookNotFoundError` (its
        ``known`` detail set), unless that payload came under this ``delivery_id``, which
        answers as the first call did. The check and the write are one fenced append, so of
        two racing deliveries one is refused."""
        if buffer is not None:
            if once:
                raise ValueError("resume_hook takes buffer= or once=, not both")
            return await self._resume_or_buffer(token, payload, delivery_id, buffer)
        return await self._resume_now(token, payload, delivery_id, once)

    async def _resume_now(
        self, token: str, payload: Any, delivery_id: str | None, once: bool = False
    ) -> str:
        hook = await self.world.get_hook(token)
        if hook is not None and self.namespace is not None:
            await self._same_namespace(hook.run_id, token)
        if hook is None or not hook.active:
            if hook is not None and await self._delivered(hook.run_id, token, delivery_id):
                return hook.run_id  # a retry after the run took the payload and went on
            state = "no hook" if hook is None else "the hook is no longer active"
            raise HookNotFoundError(f"cannot resume {token!r}: {state}", known=hook is not None)
        # a typed hook refuses a bad payload
        await check_resume(self.world, hook, payload, import_types=self.import_types)
        return await self._deliver(hook, self._plain(token, payload), delivery_id, once)

    def _plain(self, token: str, payload: Any) -> Any:
        """``payload`` as stored, refused (before anything is written) when it does not
        encode or is over the size limit."""
        plain = encode(payload, what=f"payload for hook {token!r}")
        limits.check(plain, "hook_payload", f"the payload for hook {token!r}", self._limits)
        return plain

    async def _deliver(
        self, hook: HookInfo, plain: Any, delivery_id: str | None, once: bool = False
    ) -> str:
        """Append ``plain`` as a ``hook_received`` of ``hook`` and wake its run (with
        ``once``, only if the hook has received nothing yet)."""
        token = hook.token
        data = {"payload": plain}
        wake = Wake(hook.run_id, WakeReason.HOOK).to_wire()
        key = None if delivery_id is None else f"{hook.run_id}:hook:{token}:{delivery_id}"
        event = NewEvent(EventType.HOOK_RECEIVED, hook.correlation_id, data)
        try:
            if delivery_id is None and not once:
                await self.world.append(hook.run_id, [event])
            else:
                if delivery_id is not None:
                    data["deliveryId"] = delivery_id

                def decide(events: list[Event]) -> list[NewEvent] | None:
                    if delivery_id is not None and _received(events, token, delivery_id):
                        return None  # delivered before; its wake is re-sent, deduped
                    if once and any(
                        e.type is EventType.HOOK_RECEIVED
                        and e.correlation_id == hook.correlation_id
                        for e in events
                    ):
                        raise HookNotFoundError(
                            f"cannot resume {token!r}: the hook has had its payload", known=True
                        )
                    return [event]

                await self._fenced_append(hook.run_id, decide)
        except (RunTerminalError, EntityConflictError) as err:
            # the run ended, or the hook was disposed after the look-up above: the payload
            # goes to no other hook (one that holds the token now waits for its own)
            if await self._delivered(hook.run_id, token, delivery_id):
                return hook.run_id
            why = "its run has ended" if isinstance(err, RunTerminalError) else "it was disposed"
            raise HookNotFoundError(f"cannot resume {token!r}: {why}", known=True) from None
        await send(self.world, FLOW_TOPIC, wake, idempotency_key=key)
        return hook.run_id

    async def _resume_or_buffer(
        self, token: str, payload: Any, delivery_id: str | None, buffer: Duration
    ) -> str | None:
        """``resume_hook(..., buffer=)``: resume the hook holding ``token`` now if there is
        one, else store the payload, then look for a hook once more. A worker takes a stored
        payload right after it writes a new hook (``_engine.buffered_hooks``), so a hook
        written before this store is found by the look after it, and one written after it
        takes the payload itself; the take is atomic, so exactly one of the two delivers."""
        seconds = to_seconds(buffer)
        if not 0 < seconds <= MAX_BUFFER_SECONDS:
            raise ValueError(
                f"buffer= is more than 0 and at most {MAX_BUFFER_SECONDS:.0f} seconds, "
                f"not {buffer!r}"
            )
        hook = await self.world.get_hook(token)
        if hook is not None and hook.active:
            return await self._resume_now(token, payload, delivery_id)
        if hook is not None and await self._delivered(hook.run_id, token, delivery_id):
            return hook.run_id  # a retry after a hook took the payload live and went on
        plain = self._plain(token, payload)
        now = self.world.now()
        entry = BufferedPayload(
            self.namespace or "", token, delivery_id or uuid.uuid4().hex, plain, now, now + seconds
        )
        stored = await self.world.hook_buffer().store(entry)
        if stored.taken_by is not None:
            # a repeat of a delivery id whose payload was taken: had its taker died before
            # the append, the hook would still hold the token and the look above resumed it
            return stored.taken_by
        return await self.deliver_buffered(token)

    async def deliver_buffered(self, token: str) -> str | None:
        """Take the payload buffered for ``token`` in this client's namespace and deliver it,
        if a hook of a run of that namespace holds the token now; returns that run's id, or
        the id of the run that took it before (None: it still waits). What the operator calls
        for a WorkflowHook that buffered its payload, and ``resume_hook`` after its store."""
        store, namespace = self.world.hook_buffer(), self.namespace or ""
        hook = await self.world.get_hook(token)
        if hook is not None and hook.active and await self._of_namespace(hook.run_id):
            entry = await store.take(namespace, token, hook.run_id)
            if entry is not None:
                try:
                    await check_resume(
                        self.world, hook, entry.payload, import_types=self.import_types
                    )
                    return await self._deliver(hook, entry.payload, entry.entry_id)
                except (HookNotFoundError, InvalidPayloadError):
                    await store.give_back(entry)  # it waits on, for a hook that takes it
                    raise
        found = await store.get(namespace, token)
        return None if found is None else found.taken_by

    async def _of_namespace(self, run_id: str) -> bool:
        info = await self.world.get_run(run_id)
        recorded = None if info is None else info.attributes.get("namespace")
        return (recorded or None) == self.namespace

    async def wait_for_hook(self, token: str, *, timeout: Duration | None = None) -> HookInfo:
        """Wait until a run waits on ``token``: a hook holding it has not had its first payload
        yet (the moment to resume it, where a resume sent earlier raises
        :class:`HookNotFoundError`). Returns that hook (its ``run_id`` and ``correlation_id``);
        a hook that took its first payload and still holds the token is waited past, so a
        loop that resumes a run waiting on one token again and again finds each new wait.
        A client of a namespace waits only for hooks of runs recorded in it. Raises
        :class:`HookWaitTimeoutError` after ``timeout`` (seconds, a ``timedelta`` or
        ``"10s"``; None waits for ever)."""
        seconds = None if timeout is None else to_seconds(timeout)
        deadline = None if seconds is None else time.monotonic() + seconds
        pause = 0.02  # grows to 0.5 s: each look is a read, two when a hook holds the token
        while True:
            hook = await self.world.get_hook(token)
            if hook is not None and hook.active and await self._waits_on(hook):
                return hook
            if deadline is not None and time.monotonic() >= deadline:
                raise HookWaitTimeoutError(f"no run waited on hook {token!r} within {timeout}")
            wait = pause if deadline is None else min(pause, deadline - time.monotonic())
            await asyncio.sleep(max(0.0, wait))
            pause = min(0.5, pause * 1.5)

    async def _waits_on(self, hook: HookInfo) -> bool:
        """``hook`` has not had its first payload, and its run is of this client's namespace
        (if it has one; another namespace's hook is not this client's to see)."""
        if self.namespace is not None:
            info = await self.world.get_run(hook.run_id)
            if info is None or info.attributes.get("namespace") != self.namespace:
                return False
        view = fold(hook.run_id, await self.world.list_events(hook.run_id))
        found = view.hooks.get(hook.correlation_id)
        return found is not None and found.status == "waiting"

    async def _same_namespace(self, run_id: str, token: str) -> None:
        """Refuse a hook whose run another namespace started (or none did: the CLI, a client
        of no namespace). Checked on the run of the hook this call then appends to, so a
        token taken over by another run in between cannot slip past it; a run's namespace
        is written once, in its ``run_created``. The message names this client's namespace
        only: nothing of the other run."""
        info = await self.world.get_run(run_id)
        recorded = None if info is None else info.attributes.get("namespace")
        if recorded != self.namespace:
            hint = (
                " (a run started with no namespace, by the CLI or a Client without "
                "namespace=, is resumed with `wayline hooks resume`)"
                if recorded is None
                else ""
            )
            raise WrongNamespaceError(
                f"cannot resume {token!r}: the run waiting on it was not started in "
                f"namespace {self.namespace!r}{hint}",
                namespace=self.namespace,
            )

    async def _delivered(self, run_id: str, token: str, delivery_id: str | None) -> bool:
        """A payload went to a hook holding ``token`` under ``delivery_id`` (None: never)."""
        return delivery_id is not None and _received(
            await self.world.list_events(run_id), token, delivery_id
        )

    async def wake_up(self, run_id: str, wait: str | None = None) -> list[str]:
        """Fire a pending sleep now instead of at its time (the reference runtime's
        ``wakeUp``, for tests and for operators who know the wait is over). ``wait`` names
        one wait by correlation id (``w1``, or ``h1.timeout`` to time a hook out); without it
        every pending sleep fires. The log records an early wake (``early: true``, stamped
        with the real time), not a sleep that lasted its full length. Returns the woken
        correlation ids (empty when another writer completed them first)."""
        info = await self.get_run(run_id)
        run_id = info.run_id
        if info.status.terminal:
            raise RunTerminalError(f"run {run_id} is {info.status}; there is nothing to wake")
        pending = fold(run_id, await self.world.list_events(run_id)).pending_timers()
        if wait is None:
            targets = [cid for cid in pending if is_sleep(cid)]
        elif wait in pending:
            targets = [wait]
        else:
            listed = ", ".join(pending) or "none"
            raise WaylineError(f"run {run_id} has no pending wait {wait!r} (pending: {listed})")
        woken: list[str] = []
        for cid in targets:
            data = {"resumeAt": pending[cid], "early": True}
            try:
                if timeout_of(cid):
                    if not await self._time_hook_out(run_id, cid, data):
                        continue  # completed meanwhile
                else:
                    await self.world.append(run_id, [NewEvent(EventType.WAIT_COMPLETED, cid, data)])
            except EntityConflictError:
                continue  # it came due and a worker completed it meanwhile
            except RunTerminalError:
                break
            woken.append(cid)
        if woken:
            await send(self.world, FLOW_TOPIC, Wake(run_id, WakeReason.WAKE_UP).to_wire())
        return woken

    async def _time_hook_out(self, run_id: str, cid: str, data: dict[str, Any]) -> bool:
        """Fire the hook timeout ``cid``: a hook still waiting for its first payload is
        disposed in the same write (as a worker writes it, ``planning._completions``), so no
        payload can reach it between its timeout and a worker's replay of it. Fenced on the
        log, so a payload that came first keeps its hook. False when the timeout was
        completed meanwhile."""

        def decide(events: list[Event]) -> list[NewEvent] | None:
            view = fold(run_id, events)
            if cid not in view.pending_timers():
                return None
            batch = [NewEvent(EventType.WAIT_COMPLETED, cid, data)]
            hook = view.hooks.get(timeout_of(cid))
            if hook is not None and hook.status == "waiting":
                batch.append(NewEvent(EventType.HOOK_DISPOSED, hook.cid))
            return batch

        return bool(await self._fenced_append(run_id, decide))

    def stream(
        self, run_id: str, name: str, start: int = 0, *, follow: bool = True
    ) -> AsyncIterator[StreamChunk]:
        """``async for chunk in client.stream(run_id, "progress", start=0)``: what the run's
        steps wrote to stream ``name`` (``wayline.stream`` inside a step), from index
        ``start``, in order, until the writing step settles. ``follow=False`` reads only what
        is stored now. A chunk of kind ``restart`` says the records before it from that step
        were the partial output of an attempt that did not finish. ``run_id`` may be a
        business id (see :meth:`resolve`)."""
        if is_run_id(run_id):
            return follow_stream(self.world, run_id, name, start, follow=follow)
        return self._stream_by_id(run_id, name, start, follow)

    async def _stream_by_id(
        self, id: str, name: str, start: int, follow: bool
    ) -> AsyncIterator[StreamChunk]:
        chunks = follow_stream(self.world, await self.resolve(id), name, start, follow=follow)
        try:
            async for chunk in chunks:
                yield chunk
        finally:
            await chunks.aclose()  # type: ignore[attr-defined]


@dataclass(frozen=True)
class _Start:
    """What one ``start`` call writes, and how it answers a run it finds under its id."""

    name: str
    definition: WorkflowDefinition[..., Any] | None
    data: dict[str, Any]
    id_conflict: str
    business_id: str | None
    hooks: dict[str, Any] = field(default_factory=dict)
    """``StartOptions(hooks=)``, each payload encoded: buffered for the run before it is
    created."""
    hooks_seconds: float = 0.0
    history: tuple[NewEvent, ...] = ()
    """A fork's log after its ``run_created``, appended with it in one write."""


_NEXT_RUN_POLL = 0.05
"""Seconds ``RunHandle.result`` waits before it reads again for the next run of a chain that
is not created yet (it is, a moment after the end that names it)."""

_CHAIN_READS = 1_000_000
"""Runs of a chain ``latest_run`` follows before it gives up (a bound, never reached in use:
a loop in a chain would need a run id that hashes to an older one)."""

_FENCE_ROUNDS = 1000
"""Fenced appends retried on a busy run before giving up (each round reads only the events
added since the last)."""


_UNWIND_COMMAND_EVENTS = frozenset(
    {EventType.RUN_COMPENSATION_STUCK, EventType.RUN_COMPENSATION_ABANDONED}
)
"""The events whose data the unwind commands read (the rest need no decoding)."""


def _phase(event: Event, status: RunStatus) -> RunStatus:
    """The run's status after ``event``, as far as the unwind commands care."""
    changed = run_changes(event).get("status")
    return RunStatus(changed) if changed is not None else status


def _received(events: list[Event], token: str, delivery_id: str) -> bool:
    """A ``hook_received`` under ``delivery_id`` by a hook that held ``token`` (any of them: a
    token freed and taken again in the same run is the same address to its caller)."""
    holders = {
        e.correlation_id
        for e in events
        if e.type is EventType.HOOK_CREATED and e.data.get("token") == token
    }
    return any(
        e.type is EventType.HOOK_RECEIVED
        and e.correlation_id in holders
        and e.data.get("deliveryId") == delivery_id
        for e in events
    )


def _not_begun(info: RunInfo) -> bool:
    """Whether a debounced run has not begun: pending, or paused before it began (a run pauses
    while pending too, and is as open to a later start of its key as an unpaused one)."""
    return info.status is RunStatus.PENDING or (
        info.status is RunStatus.PAUSED and info.started_at is None
    )
