"""The console's HTTP API (docs/openapi.json): what the pages use, and what any language can
call. Every handler reads and acts through the public :class:`wayline.Client`; only the clock
and the visibility that the ``runs show`` story names come from its world, as in the CLI."""

from __future__ import annotations

import asyncio
import io
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from ..._core.events import Event
from ..._sdk.webhooks import verify
from ...client import Client
from ...errors import RunNotFoundError, WaylineError, WorkflowNotFoundError
from ...start_options import StartOptions
from ...world import RunInfo
from ...world.blobs import payload_field
from ...world.business_ids import check_business_id
from ...world.ports.blobs import PayloadField
from ..loading import UsageError
from ..schedules import NoSuchSchedule, listed, set_suspended, tick_run_id
from ..timeline import render_show, run_to_json
from .errors import ApiError, from_api_error, from_wayline_error
from .event_pages import FIRST_PAGE as FIRST_EVENTS
from .event_pages import MAX_PAGE as MAX_EVENTS
from .event_pages import archived_page, check_cursor, event_cursor, events_json
from .folds import KEPT_RUNS, RunFolds
from .hook_list import FIRST_PAGE as FIRST_HOOKS
from .hook_list import MAX_PAGE as MAX_HOOKS
from .hook_list import hook_cursor, hook_page, hooks_json, next_hook_cursor, shown_hooks
from .hook_pages import FIRST_PAGE as FIRST_PAYLOADS
from .hook_pages import MAX_PAGE as MAX_PAYLOADS
from .hook_pages import carried, payload_cursor, payload_page
from .payloads import (
    encoded,
    hook_of,
    noted,
    payload_index,
    probed,
    shown,
    stored_value,
    story_info,
    streamed,
    value_response,
)
from .queues import queues_json, with_lag
from .requests import (
    MAX_BODY_BYTES,
    check_bearer,
    check_token,
    decode_cursor,
    encode_cursor,
    int_param,
    json_body,
    parse_json,
    raw_body,
    status_param,
    text_field,
)
from .steps import (
    FIRST_PAGE,
    MAX_PAGE,
    groups_of,
    occurrences,
    page_of,
    step_cursor,
    step_of,
)

STORY_RESULT_CHARS = 200
"""How much of a run's result its story (the ``runs show`` text the page shows) prints: as
much as of its input; the whole value is read from ``/api/runs/{id}/output``."""

SCAN_LIMIT = 10_000
"""How many of the newest runs the workers page and the live feed look at."""


class Reply(JSONResponse):
    """JSON whose values the world gave (a timestamp, a stored payload) as the CLI prints
    them: what JSON has no type for is written as its text."""

    def render(self, content: Any) -> bytes:
        return json.dumps(content, default=str, separators=(",", ":")).encode()


Handler = Callable[[Request], Awaitable[Response]]


@dataclass
class Console:
    """What every handler needs: the client, the token that allows actions (None: read-only),
    how often a live feed looks for changes, the event that ends every feed at shutdown, and
    the largest request body read."""

    client: Client
    world_url: str
    token: str | None = None
    poll_seconds: float = 0.5
    closing: asyncio.Event | None = None
    max_body_bytes: int = MAX_BODY_BYTES
    schedules_file: Path | None = None
    webhook_secrets: tuple[str, ...] = ()
    read_only: bool = False
    reads_need_token: bool = False
    kept_folds: int = KEPT_RUNS

    def __post_init__(self) -> None:
        self.folds = RunFolds(self.client, self.kept_folds)

    @property
    def action_token(self) -> str | None:
        """The token actions need; None: every action is refused as read-only, which a
        console given a token for its reads alone (``--read-only``) is too."""
        return None if self.read_only else self.token

    def endpoint(self, handler: Handler, *, signed: bool = False) -> Handler:
        """Bad input and framework refusals become typed error bodies, never a 500.
        ``signed``: the request carries its own credential (a webhook URL's signature), so
        ``reads_need_token`` does not ask it for the bearer token too."""

        async def wrapped(request: Request) -> Response:
            try:
                if self.reads_need_token and self.token is not None and not signed:
                    # a console reachable by more than its users (a pod behind a Service)
                    # shows runs' inputs and results only to whoever holds the token
                    check_bearer(request, self.token, "this console's API needs its bearer token")
                return await handler(request)
            except ApiError as err:
                return from_api_error(err)
            except WaylineError as err:
                return from_wayline_error(err)

        return wrapped

    # --- reading ------------------------------------------------------------------------
    async def info(self, request: Request) -> Response:
        return Reply({"readOnly": self.action_token is None, "world": self.world_url})

    async def list_runs(self, request: Request) -> Response:
        status = status_param(request)
        workflow = request.query_params.get("workflow") or None
        where = request.query_params.getlist("where") or None
        limit = int_param(request, "limit", 50, 1, 500)
        after = decode_cursor(request)
        # the console reads this page often: a world that can keep its runs index in memory
        # starts to (at once; this page is read as before until it is loaded)
        await self.client.world.follow_runs()
        # one more than the page: whether a next page exists, without counting the rest
        chosen = await self.client.runs_page(
            after, limit + 1, status=status, where=where, workflow=workflow
        )
        # asked before and after the counts: a load that ends in between leaves exact counts
        # marked partial (the next call says so), and counts that became partial in between
        # (a NATS world whose server did not count its index) are marked so, so partial
        # counts are never marked exact. Counts filtered by search attributes are read from
        # the attribute index, not from the runs loaded so far: they are exact whatever the
        # load has read.
        loading = not where and self.client.world.runs_loading()
        counts = await self.client.count_runs(where=where, workflow=workflow)
        loading = loading or (not where and self.client.world.runs_loading())
        page = chosen[:limit]
        more = len(chosen) > limit
        cursor = encode_cursor(page[-1].created_at, page[-1].run_id) if more else None
        return Reply(
            {
                "runs": [run_to_json(r) for r in page],
                "nextCursor": cursor,
                "counts": counts,
                "countsPartial": loading,
            }
        )

    async def _run(self, request: Request) -> RunInfo:
        run_id = await self.client.resolve(request.path_params["run_id"])
        return await self.client.get_run(run_id)

    async def get_run(self, request: Request) -> Response:
        run_id = await self.client.resolve(request.path_params["run_id"])
        world = self.client.world
        # the run and its log as stored: a large input, output or step result is still its
        # blob's reference, measured by it and linked, so reading a run of a 50 MB input
        # reads 1 KiB of it (its preview), not 50 MB (docs/console.md, "Large payloads")
        info, archived = await self._view(run_id)
        # a log (or an archive's copy) that does not read is a 409 here
        events = archived if archived is not None else await world.stored_events(run_id)
        waiting = await self.client.waiting_for_worker(info)
        folded = await self.folds.read(info.run_id, info, events)
        # the hooks as of now: the fold is shared, and another request of the run may bring it
        # forward (a hook made since) while this one awaits a payload's preview below
        hooks = list(folded.view.hooks.values())
        # the hooks the run's JSON carries: its first and last ones and those that wait, with
        # their count; a run that made thousands (one per loop iteration) pages the rest
        numbers = shown_hooks(hooks)
        # which of its hooks' payloads the run's JSON carries, and its story prints: a hook's
        # first and last ones, within one budget for the whole run (a run of many busy hooks)
        shares = carried(hooks[n] for n in numbers)
        story = io.StringIO()
        render_show(
            story_info(info),
            events,
            story,
            self.world_url,
            waiting,
            now=world.now(),
            visibility_seconds=world.visibility_seconds,
            # the story is read in the page, next to the output's own preview and link: a
            # large result printed whole would put the value back into the run's JSON
            result_limit=STORY_RESULT_CHARS,
            # a hook's payloads as the run's JSON carries them: its first and last ones
            hook_payloads=shares,
            # the hooks the run's JSON carries: a run of thousands of hooks prints those alone
            hooks_shown=shares.keys(),
            # the fold kept for the run's JSON: the story does not fold the log a second time
            view=folded.view,
            noted=noted,
        )
        out = run_to_json(info)
        await shown(world, info, out, "input")  # a large one is read from /input or /output
        await shown(world, info, out, "output")
        out["waitingForWorker"] = waiting
        out["archived"] = archived is not None
        out.update(folded.view.to_json())
        # a hook's first and last payloads alone, with their count: a hook resumed thousands
        # of times (an `async for` over it) pages through the rest (/hooks/{hook}/payloads)
        out["hooks"] = await hooks_json(world, run_id, hooks, numbers)
        out["hookCount"], out["nextHookCursor"] = len(hooks), next_hook_cursor(hooks, numbers)
        # a long run's steps follow a page at a time (/steps): its waits and children come
        # whole, as they are few next to the steps a loop can make
        first = await page_of(world, run_id, folded.steps, 0, FIRST_PAGE)
        out["steps"], out["stepCount"] = first["steps"], first["stepCount"]
        out["nextStepCursor"] = first["nextCursor"]
        out["stepGroups"] = groups_of(folded.steps)
        out["story"] = story.getvalue()
        out["eventCount"] = len(events)
        return Reply(out)

    async def input(self, request: Request) -> Response:
        """``GET /api/runs/{id}/input``: the run's input as JSON, streamed in chunks."""
        return await self._payload(request, "input")

    async def output(self, request: Request) -> Response:
        """``GET /api/runs/{id}/output``: the run's output as JSON (null while it has none),
        streamed in chunks."""
        return await self._payload(request, "output")

    async def _view(self, run_id: str) -> tuple[RunInfo, list[Event] | None]:
        """The run as stored, with None, when it is live; else the run the archive holds
        (``wayline archive``) with its log, as stored too; RunNotFoundError when neither."""
        world = self.client.world
        info = await world.stored_run(run_id)
        if info is not None:
            return info, None
        found = await world.archived_run(run_id)
        if found is None:
            raise RunNotFoundError(f"no run {run_id}")  # as Client.get_run says it
        return found

    async def _payload(self, request: Request, which: PayloadField) -> Response:
        run_id = await self.client.resolve(request.path_params["run_id"])
        info, archived = await self._view(run_id)
        if archived is not None:  # its payloads are read where the archive keeps them
            value, ref = getattr(info, which), payload_field(info, which)
            if request.method == "HEAD":
                size = ref.size if ref is not None else len(encoded(value))
                headers = {"Cache-Control": "no-cache", "Content-Length": str(size)}
                return Response(media_type="application/json", headers=headers)
            return await value_response(self.client.world, run_id, value, ref)
        if request.method == "HEAD":
            return await probed(self.client, run_id, which)
        return await streamed(self.client, run_id, which)

    async def steps(self, request: Request) -> Response:
        """``GET /api/runs/{id}/steps?after=&limit=&group=``: the steps after the cursor
        ``after`` (a ``nextStepCursor`` or ``nextCursor`` given before), in the log's order;
        with ``group``, the occurrences of the step of that name alone (a ``stepGroups``
        entry's), paged the same way."""
        after = step_cursor(request)
        limit = int_param(request, "limit", FIRST_PAGE, 1, MAX_PAGE)
        group = request.query_params.get("group")
        run_id = await self.client.resolve(request.path_params["run_id"])
        # the run's summary (one row on SQLite, its last message on NATS) and the log past the
        # fold kept of the run alone: a page of a long run would otherwise read and fold the
        # whole log (Client.get_run reads it too, on SQLite)
        folded = await self.folds.read(run_id, *await self._view(run_id))
        steps = folded.steps if group is None else occurrences(folded.steps, group)
        return Reply(await page_of(self.client.world, run_id, steps, after, limit))

    async def step_result(self, request: Request) -> Response:
        """``GET /api/runs/{id}/steps/{step}/result``: the step's result as JSON (null while
        it has none), streamed in chunks from its blob when it is stored out of line."""
        run_id = await self.client.resolve(request.path_params["run_id"])
        folded = await self.folds.read(run_id, *await self._view(run_id))
        result = step_of(folded.steps, request.path_params["step"]).get("result")
        return await stored_value(self.client, run_id, result)

    async def hook_payload(self, request: Request) -> Response:
        """``GET /api/runs/{id}/hooks/{hook}/payloads/{n}``: the hook's ``n``-th payload (0 the
        first) as JSON, streamed in chunks from its blob when it is stored out of line."""
        run_id = await self.client.resolve(request.path_params["run_id"])
        folded = await self.folds.read(run_id, *await self._view(run_id))
        hook = hook_of(folded.view.hooks, request.path_params["hook"])
        n = payload_index(request.path_params["n"], hook)
        stored = hook.payload if n == 0 else hook.later[n - 1][1]
        return await stored_value(self.client, run_id, stored)

    async def hook_payloads(self, request: Request) -> Response:
        """``GET /api/runs/{id}/hooks/{hook}/payloads?after=&limit=``: the hook's payloads
        after the cursor ``after`` (a ``nextPayloadCursor`` or ``nextCursor`` given before),
        in the order they came."""
        limit = int_param(request, "limit", FIRST_PAYLOADS, 1, MAX_PAYLOADS)
        run_id = await self.client.resolve(request.path_params["run_id"])
        folded = await self.folds.read(run_id, *await self._view(run_id))
        hook = hook_of(folded.view.hooks, request.path_params["hook"])
        after = payload_cursor(request, hook)
        return Reply(await payload_page(self.client.world, run_id, hook, after, limit))

    async def run_hooks(self, request: Request) -> Response:
        """``GET /api/runs/{id}/hooks?after=&limit=``: the run's hooks after the cursor
        ``after`` (a ``nextHookCursor`` or ``nextCursor`` given before), in the order they
        were made, each with its first and last payloads as the run's JSON carries them."""
        limit = int_param(request, "limit", FIRST_HOOKS, 1, MAX_HOOKS)
        run_id = await self.client.resolve(request.path_params["run_id"])
        folded = await self.folds.read(run_id, *await self._view(run_id))
        hooks = list(folded.view.hooks.values())
        after = hook_cursor(request, hooks)
        return Reply(await hook_page(self.client.world, run_id, hooks, after, limit))

    async def events(self, request: Request) -> Response:
        """``GET /api/runs/{id}/events?after=&limit=``: at most ``limit`` events after the
        cursor ``after`` (a ``nextCursor``, or an event's ``seq``), in the log's order, read
        from the world as a page: a run of 150,000 events is never read or sent whole."""
        limit = int_param(request, "limit", FIRST_EVENTS, 1, MAX_EVENTS)
        run_id = await self.client.resolve(request.path_params["run_id"])
        world = self.client.world
        after = event_cursor(request)
        # the page first, then the run's summary alone (one row on SQLite: Client.get_run
        # would read the whole log there to check it, which is what a page must not do). In
        # this order the summary's last seq counts every event the page's read could see, so
        # an append between the two reads cannot end a walk early (a null nextCursor) or count
        # fewer events than exist, and a run deleted between them is a 404, not an empty page
        page = await world.events_page(run_id, after, limit)
        info = await world.stored_run(run_id)
        if info is None:
            # archived (``wayline archive``), maybe since the walk's last page: its pages are
            # read from the archive, a page at a time (``World.archived_page``), as the live
            # run's are from its log
            found = await world.archived_page(run_id, after, limit)
            if found is not None:
                last, stored = found
                check_cursor(after, last)
                return Reply(events_json(await archived_page(world, run_id, stored), last))
            info, _ = await self._view(run_id)  # live again since the page, or a 404
        check_cursor(after, info.last_seq)
        return Reply(events_json(page, info.last_seq))

    async def hooks(self, request: Request) -> Response:
        run = request.query_params.get("run") or None
        run_id = None if run is None else await self.client.resolve(run)
        return Reply({"hooks": await self.client.open_hooks(run_id)})

    async def workers(self, request: Request) -> Response:
        waiting = await self.client.runs_waiting_for_worker(SCAN_LIMIT)
        depths = await self.client.world.queue_depths()
        return Reply(
            {
                "now": self.client.world.now(),
                "served": with_lag(await self.client.list_served(), depths),
                "queues": queues_json(depths),
                "waiting": [{**run_to_json(info), "why": why} for info, why in waiting],
            }
        )

    async def schedules(self, request: Request) -> Response:
        """The schedules of ``wayline schedules`` (kept in a file, not in the world), each with
        its next tick and the run its last tick started."""
        if self.schedules_file is None:
            return Reply({"file": None, "schedules": []})
        try:
            names, entries = await asyncio.to_thread(listed, self.schedules_file)
        except UsageError as err:  # a file the schedulers could not read either
            raise ApiError(503, "CONFIGURATION_ERROR", str(err)) from None
        shown = []
        for name, entry in zip(names, entries, strict=True):
            last, status = entry.get("lastTick"), None
            run_id = (
                tick_run_id({**entry, "name": name}, last) if last and "created" in entry else None
            )
            if run_id is not None:
                try:
                    status = str((await self.client.get_run(run_id)).status)
                except RunNotFoundError:  # cleaned up since, or the tick started no run
                    run_id = None
            shown.append({**entry, "name": name, "lastRunId": run_id, "lastRunStatus": status})
        return Reply({"file": str(self.schedules_file), "schedules": shown})

    async def suspend_schedule(self, request: Request) -> Response:
        return await self._set_suspended(request, True)

    async def resume_schedule(self, request: Request) -> Response:
        return await self._set_suspended(request, False)

    async def _set_suspended(self, request: Request, suspended: bool) -> Response:
        """Suspend or resume a schedule of ``--schedules-file``: ``{name, suspended}``."""
        check_token(request, self.action_token)
        name = request.path_params["name"]
        if self.schedules_file is None or not self.schedules_file.exists():
            raise ApiError(404, "SCHEDULE_NOT_FOUND", f"no schedule {name!r}")
        try:
            await asyncio.to_thread(set_suspended, self.schedules_file, name, suspended)
        except NoSuchSchedule:
            raise ApiError(404, "SCHEDULE_NOT_FOUND", f"no schedule {name!r}") from None
        except UsageError as err:  # a file the schedulers could not read either
            raise ApiError(503, "CONFIGURATION_ERROR", str(err)) from None
        return Reply({"name": name, "suspended": suspended})

    # --- acting -------------------------------------------------------------------------
    async def start(self, request: Request) -> Response:
        check_token(request, self.action_token)
        body = await json_body(request, self.max_body_bytes)
        workflow = text_field(body, "workflow")
        if not workflow:
            raise ApiError(400, "BAD_REQUEST", "workflow (the workflow's name) is required")
        args, kwargs = body.get("args", []), body.get("kwargs", {})
        if not isinstance(args, list) or not isinstance(kwargs, dict):
            raise ApiError(400, "BAD_REQUEST", "args must be a JSON array, kwargs an object")
        business_id = text_field(body, "id")
        if business_id is not None:
            check_business_id(business_id)  # refused here, before the name is looked up
        options = StartOptions(id=business_id, queue=text_field(body, "queue"))
        served = await self.client.list_served()
        if not any(entry.get("workflow") == workflow for entry in served):
            # as `wayline start NAME`: a misspelled name would start a run nobody ever drives
            raise WorkflowNotFoundError(
                f"no worker has ever registered workflow {workflow!r}: start one, or check the name"
            )
        handle = await self.client.start_with(options, workflow, *args, **kwargs)
        return Reply({"runId": handle.run_id}, status_code=201)

    async def cancel(self, request: Request) -> Response:
        return await self._stop(request, "cancelled", self.client.cancel)

    async def terminate(self, request: Request) -> Response:
        return await self._stop(request, "terminated", self.client.terminate)

    async def _stop(
        self, request: Request, done: str, stop: Callable[[str, str], Awaitable[bool]]
    ) -> Response:
        """Cancel or terminate: ``{runId, cancelled|terminated}``, false when it had ended."""
        check_token(request, self.action_token)
        body = await json_body(request, self.max_body_bytes)
        info = await self._run(request)
        reason = text_field(body, "reason") or f"{done} from the console"
        return Reply({"runId": info.run_id, done: await stop(info.run_id, reason)})

    async def resume_hook(self, request: Request) -> Response:
        check_token(request, self.action_token)
        body = await json_body(request, self.max_body_bytes)
        if "payload" not in body:
            raise ApiError(400, "BAD_REQUEST", 'the body must be {"payload": <any JSON>}')
        delivery = request.headers.get("idempotency-key") or None
        run_id = await self.client.resume_hook(
            request.path_params["token"], body["payload"], delivery_id=delivery
        )
        return Reply({"runId": run_id})

    async def webhook(self, request: Request) -> Response:
        """``POST /hooks/{token}/webhook?sig=``: the signature is the credential, no bearer
        token. The body is the payload itself; the hook takes one payload (``once``), and an
        ``Idempotency-Key`` makes a retried POST answer as the first did."""
        token = request.path_params["token"]
        if not self.webhook_secrets:
            raise ApiError(
                503,
                "CONFIGURATION_ERROR",
                "this console has no webhook key (WAYLINE_WEBHOOK_SECRET)",
            )
        if not verify(self.webhook_secrets, token, request.query_params.get("sig", "")):
            # the same answer for any token: a refusal does not say whether the hook exists
            raise ApiError(403, "BAD_SIGNATURE", "the URL's signature is not this hook's")
        raw = await raw_body(request, self.max_body_bytes)
        if not raw.strip():
            raise ApiError(400, "BAD_REQUEST", "the body must be the payload, as JSON")
        payload = parse_json(raw)
        delivery = request.headers.get("idempotency-key") or None
        run_id = await self.client.resume_hook(token, payload, delivery_id=delivery, once=True)
        return Reply({"runId": run_id})

    # --- live ---------------------------------------------------------------------------
    async def stream(self, request: Request) -> Response:
        info = await self._run(request)
        start = int_param(request, "start", 0, 0, 2**53)
        follow = request.query_params.get("follow", "true") != "false"
        chunks = self.client.stream(info.run_id, request.path_params["name"], start, follow=follow)

        async def sse() -> AsyncIterator[str]:
            async for chunk in chunks:
                data = {"data": chunk.data, "stepId": chunk.step_id, "attempt": chunk.attempt}
                yield _sse(chunk.kind, data, event_id=str(chunk.index))
            yield _sse("end", {})

        return _event_stream(sse())

    async def live(self, request: Request) -> Response:
        """``change`` whenever what the page shows may differ: the newest runs' statuses, or
        one run's log length. A hint: the page reads the API again."""
        run = request.query_params.get("run") or None
        run_id = None if run is None else await self.client.resolve(run)
        seen_seq = 0

        async def look() -> Any:
            nonlocal seen_seq
            if run_id is not None:
                # the run's summary and only the events after the last one seen: a run of
                # thousands of steps would otherwise be read whole at every poll (twice on
                # SQLite, where Client.get_run reads the log too) and keep the loop busy
                info = await self.client.world.get_run(run_id)
                fresh = await self.client.world.list_events(run_id, after_seq=seen_seq)
                seen_seq = fresh[-1].seq if fresh else seen_seq
                status = None if info is None else (str(info.status), info.updated_at)
                return status, seen_seq
            runs = await self.client.list_runs(limit=SCAN_LIMIT)
            return [(r.run_id, str(r.status), r.updated_at) for r in runs]

        async def sse() -> AsyncIterator[str]:
            seen = await look()
            yield _sse("change", {"runId": run_id})  # the page's first read comes after this
            while True:
                if self.closing is not None and self.closing.is_set():
                    return
                await asyncio.sleep(self.poll_seconds)
                now = await look()
                if now != seen:
                    seen = now
                    yield _sse("change", {"runId": run_id})
                else:
                    yield ": still here\n\n"  # a comment: finds a closed connection

        return _event_stream(sse())


def _sse(event: str, data: Any, event_id: str | None = None) -> str:
    head = f"id: {event_id}\n" if event_id is not None else ""
    return f"{head}event: {event}\ndata: {json.dumps(data)}\n\n"


def _event_stream(body: AsyncIterator[str]) -> StreamingResponse:
    headers = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
    return StreamingResponse(body, media_type="text/event-stream", headers=headers)
