"""``wayline.Client``: start runs, watch them, cancel them, resume hooks."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

from ._core.events import Event, EventType, NewEvent, RunStatus
from ._core.ids import is_run_id, new_run_id
from ._core.serde import decode, encode
from ._core.waits import is_sleep, pending_waits
from ._sdk.definitions import WorkflowDefinition
from ._sdk.hooks import check_resume
from ._sdk.streams import StreamChunk, follow_stream
from .errors import (
    EntityConflictError,
    HookNotFoundError,
    ResultTimeoutError,
    RunCancelledError,
    RunFailedError,
    RunNotFoundError,
    RunTerminalError,
    SequenceConflictError,
    WaylineError,
    WorkflowNotFoundError,
)
from .world import FLOW_TOPIC, RunInfo, World


class RunHandle:
    def __init__(self, client: Client, run_id: str, workflow: WorkflowDefinition | None) -> None:
        self.client = client
        self.run_id = run_id
        self._workflow = workflow

    async def status(self) -> RunStatus:
        return (await self.client.get_run(self.run_id)).status

    async def events(self) -> list[Event]:
        return await self.client.world.list_events(self.run_id)

    async def result(self, timeout: float | None = None) -> Any:
        """The run's output; raises the run's failure (or cancellation)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        world = self.client.world
        # A world that hears of every terminal append can be polled rarely; the poll is only
        # the fallback for a hint lost on the way.
        pause, longest = (0.05, 1.0) if world.terminal_hints else (0.002, 0.1)
        while True:
            ended = world.watch_terminal(self.run_id)
            try:
                info = await self.client.get_run(self.run_id)
                if info.status.terminal:
                    return self._outcome(info)
                if deadline is not None and time.monotonic() >= deadline:
                    raise ResultTimeoutError(
                        f"run {self.run_id} still {info.status} after {timeout}s"
                    )
                wait = pause if deadline is None else min(pause, deadline - time.monotonic())
                await asyncio.wait({ended}, timeout=max(0.0, wait))
            finally:
                world.unwatch_terminal(self.run_id, ended)
            pause = min(longest, pause * 1.5)

    def _outcome(self, info: RunInfo) -> Any:
        if info.status is RunStatus.COMPLETED:
            hint = self._workflow.signature.return_hint if self._workflow else None
            return decode(info.output, hint, what=f"result of run {self.run_id}")
        if info.status is RunStatus.FAILED:
            error = dict(info.error or {})
            raise RunFailedError(
                f"run {self.run_id} failed: [{error.get('code')}] {error.get('message')}",
                error_code=str(error.get("code", "")),
                error=error,
            )
        raise RunCancelledError(f"run {self.run_id} was cancelled")


class Client:
    def __init__(self, world: World, workflows: list[WorkflowDefinition] | None = None) -> None:
        self.world = world
        self._workflows = {w.name: w for w in workflows or []}

    async def start(
        self,
        workflow: WorkflowDefinition | str,
        *args: Any,
        run_id: str | None = None,
        **kwargs: Any,
    ) -> RunHandle:
        """Start a run. With ``run_id`` (``wf_`` + 32 hex digits) the call is idempotent:
        repeating it, after any crash, starts no second run and only re-sends the start."""
        if isinstance(workflow, str):
            definition = self._workflows.get(workflow)
            if definition is None and self._workflows:
                known = ", ".join(sorted(self._workflows)) or "none"
                raise WorkflowNotFoundError(f"unknown workflow {workflow!r} (known: {known})")
            name = workflow
        else:
            definition, name = workflow, workflow.name
        if definition is not None:
            stored = definition.signature.encode_args(args, kwargs, what=f"workflow {name!r}")
        else:
            stored = {"args": encode(list(args), what=f"workflow {name!r} arguments")}
            if kwargs:
                stored["kwargs"] = encode(kwargs, what=f"workflow {name!r} arguments")
        if run_id is None:
            run_id = new_run_id()
        elif not is_run_id(run_id):
            raise WaylineError(f"a run id is 'wf_' and 32 lowercase hex digits, not {run_id!r}")
        data: dict[str, Any] = {"workflow": name, "input": stored}
        if definition is not None:
            data["revision"] = definition.revision
            data["definition"] = definition.identity_record()
        try:
            await self.world.append(
                run_id, [NewEvent(EventType.RUN_CREATED, data=data)], expected_seq=0
            )
        except (EntityConflictError, SequenceConflictError):
            existing = await self.get_run(run_id)
            if existing.workflow != name:
                raise WaylineError(
                    f"run {run_id} exists already, for workflow {existing.workflow!r}"
                ) from None
        await self.world.enqueue(
            FLOW_TOPIC, {"runId": run_id, "reason": "start"}, idempotency_key=f"{run_id}:start"
        )
        return RunHandle(self, run_id, definition)

    def handle(self, run_id: str) -> RunHandle:
        return RunHandle(self, run_id, None)

    async def get_run(self, run_id: str) -> RunInfo:
        info = await self.world.get_run(run_id)
        if info is None:
            raise RunNotFoundError(f"no run {run_id}")
        return info

    async def list_runs(
        self, status: RunStatus | str | None = None, limit: int = 100
    ) -> list[RunInfo]:
        return await self.world.list_runs(
            status=RunStatus(status) if status is not None else None, limit=limit
        )

    async def cancel(self, run_id: str, reason: str = "cancelled") -> bool:
        """Ask a run to stop; False when it had already ended. A worker then stops it, runs
        its compensations (if any) and records ``run_cancelled``. Running step bodies are not
        interrupted, but nothing new starts."""
        await self.get_run(run_id)
        try:
            await self.world.append(
                run_id, [NewEvent(EventType.RUN_CANCEL_REQUESTED, data={"reason": reason})]
            )
        except RunTerminalError:
            return False
        await self.world.enqueue(FLOW_TOPIC, {"runId": run_id, "reason": "cancel"})
        return True

    async def resume_compensation(self, run_id: str) -> None:
        """Try a failed compensation again (the run is ``compensation_stuck``)."""
        await self._unwind_command(run_id, EventType.RUN_COMPENSATION_RESUMED)

    async def abandon_compensation(self, run_id: str) -> None:
        """Give up the unwind of a ``compensation_stuck`` run; it ends failed or cancelled."""
        await self._unwind_command(run_id, EventType.RUN_COMPENSATION_ABANDONED)

    async def _unwind_command(self, run_id: str, event: EventType) -> None:
        info = await self.get_run(run_id)
        if info.status is not RunStatus.COMPENSATION_STUCK:
            raise WaylineError(
                f"run {run_id} is {info.status}, not compensation_stuck; nothing to "
                f"{'resume' if event is EventType.RUN_COMPENSATION_RESUMED else 'abandon'}"
            )
        try:
            await self.world.append(run_id, [NewEvent(event)])
        except (RunTerminalError, EntityConflictError) as err:
            raise WaylineError(f"run {run_id}: {err}") from err
        await self.world.enqueue(FLOW_TOPIC, {"runId": run_id, "reason": str(event)})

    async def resume_hook(
        self, token: str, payload: Any = None, *, delivery_id: str | None = None
    ) -> str:
        """Deliver ``payload`` to the hook holding ``token``; returns the run id. With
        ``delivery_id`` the call is idempotent: a payload already delivered under that id (a
        caller retrying after a crash) is not delivered again."""
        hook = await self.world.get_hook(token)
        if hook is None or not hook.active:
            state = "no hook" if hook is None else "the hook is no longer active"
            raise HookNotFoundError(f"cannot resume {token!r}: {state}", known=hook is not None)
        await check_resume(self.world, hook, payload)  # a typed hook refuses a bad payload
        data = {"payload": encode(payload, what=f"payload for hook {token!r}")}
        wake = {"runId": hook.run_id, "reason": "hook"}
        key = None if delivery_id is None else f"{hook.run_id}:hook:{delivery_id}"
        if delivery_id is not None:
            data["deliveryId"] = delivery_id
            for e in await self.world.list_events(hook.run_id):
                if e.type is EventType.HOOK_RECEIVED and e.data.get("deliveryId") == delivery_id:
                    await self.world.enqueue(FLOW_TOPIC, wake, idempotency_key=key)
                    return hook.run_id  # delivered before; its wake is re-sent, deduped
        try:
            await self.world.append(
                hook.run_id, [NewEvent(EventType.HOOK_RECEIVED, hook.correlation_id, data)]
            )
        except RunTerminalError:
            raise HookNotFoundError(
                f"cannot resume {token!r}: its run has ended", known=True
            ) from None
        await self.world.enqueue(FLOW_TOPIC, wake, idempotency_key=key)
        return hook.run_id

    async def wake_up(self, run_id: str, wait: str | None = None) -> list[str]:
        """Fire a pending sleep now instead of at its time (the reference runtime's
        ``wakeUp``, for tests and for operators who know the wait is over). ``wait`` names
        one wait by correlation id (``w1``, or ``h1.timeout`` to time a hook out); without it
        every pending sleep fires. The log records an early wake (``early: true``, stamped
        with the real time), not a sleep that lasted its full length. Returns the woken
        correlation ids (empty when another writer completed them first)."""
        info = await self.get_run(run_id)
        if info.status.terminal:
            raise WaylineError(f"run {run_id} is {info.status}; there is nothing to wake")
        pending = pending_waits(await self.world.list_events(run_id))
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
                await self.world.append(run_id, [NewEvent(EventType.WAIT_COMPLETED, cid, data)])
            except EntityConflictError:
                continue  # it came due and a worker completed it meanwhile
            except RunTerminalError:
                break
            woken.append(cid)
        if woken:
            await self.world.enqueue(FLOW_TOPIC, {"runId": run_id, "reason": "wake_up"})
        return woken

    def stream(
        self, run_id: str, name: str, start: int = 0, *, follow: bool = True
    ) -> AsyncIterator[StreamChunk]:
        """``async for chunk in client.stream(run_id, "progress", start=0)``: what the run's
        steps wrote to stream ``name`` (``wayline.stream`` inside a step), from index
        ``start``, in order, until the writing step settles. ``follow=False`` reads only what
        is stored now. A chunk of kind ``restart`` says the records before it from that step
        were the partial output of an attempt that did not finish."""
        return follow_stream(self.world, run_id, name, start, follow=follow)
