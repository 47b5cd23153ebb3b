"""The console API's OpenAPI document, served at ``/api/openapi.json`` and checked into
docs/openapi.json (a test keeps the two equal, and every route of the app in it)."""

from __future__ import annotations

from typing import Any

from ..._core.events import RunStatus
from .event_pages import FIRST_PAGE as EVENTS_FIRST_PAGE
from .event_pages import MAX_PAGE as EVENTS_MAX_PAGE
from .hook_list import FIRST_PAGE as HOOKS_FIRST_PAGE
from .hook_list import HEAD_HOOKS, TAIL_HOOKS, WAITING_HOOKS
from .hook_list import MAX_PAGE as HOOKS_MAX_PAGE
from .hook_pages import FIRST_PAGE as HOOK_PAYLOADS_FIRST_PAGE
from .hook_pages import HEAD_PAYLOADS, RUN_PAYLOADS, TAIL_PAYLOADS
from .hook_pages import MAX_PAGE as HOOK_PAYLOADS_MAX_PAGE
from .payloads import PAYLOAD_NUMBER_DIGITS

_ERROR = {"$ref": "#/components/responses/Error"}
_RUN_ID = {
    "name": "run_id",
    "in": "path",
    "required": True,
    "description": "a run id (wf_ and 32 hex digits) or a business id (its newest run)",
    "schema": {"type": "string"},
}
_AUTH: list[dict[str, list[str]]] = [{"bearer": []}]


def _json(schema: dict[str, Any], description: str = "OK") -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def _sse(description: str) -> dict[str, Any]:
    return {
        "description": description,
        "content": {"text/event-stream": {"schema": {"type": "string"}}},
    }


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def _body(schema: dict[str, Any], required: bool = False) -> dict[str, Any]:
    return {"required": required, "content": {"application/json": {"schema": schema}}}


def _errors(*statuses: int) -> dict[str, Any]:
    return {str(s): _ERROR for s in statuses}


_ID = {"type": "string", "maxLength": 200}
"""A step's or a hook's id in a link's path."""


def _in_path(name: str, description: str, schema: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": name,
        "in": "path",
        "required": True,
        "description": description,
        "schema": schema,
    }


def _linked(op: str, summary: str, what: str, *params: dict[str, Any]) -> dict[str, Any]:
    """A link that streams one value of a run's fold (a step's result, a hook's payload)."""
    return {
        "get": {
            "operationId": op,
            "summary": summary,
            "parameters": [_RUN_ID, *params],
            "responses": {
                "200": _json({}, f"the {what}'s JSON, sent chunked"),
                **_errors(400, 404, 409),
            },
        }
    }


def _paged(after: str, first: int, most: int) -> list[dict[str, Any]]:
    """A page's query parameters: the cursor ``after`` (described) and ``limit``."""
    return [
        {"name": "after", "in": "query", "description": after, "schema": {"type": "string"}},
        {
            "name": "limit",
            "in": "query",
            "schema": {"type": "integer", "minimum": 1, "maximum": most, "default": first},
        },
    ]


def _page(
    items: str, schema: dict[str, Any], count: str, counted: str, last: str
) -> dict[str, Any]:
    """A page's schema: its ``items``, their ``count`` and the next page's cursor."""
    return {
        "type": "object",
        "required": [items, count, "nextCursor"],
        "properties": {
            items: schema,
            count: {"type": "integer", "description": counted},
            "nextCursor": {
                "type": ["string", "null"],
                "description": f"after= for the next page; null: this page ends with {last}",
            },
        },
    }


def _payload(op: str, which: str) -> dict[str, Any]:
    return {
        "get": {
            "operationId": op,
            "summary": f"the run's {which} as JSON, streamed in chunks (from the blob store "
            "when it is stored out of line); the run's JSON links a large one here",
            "parameters": [_RUN_ID],
            "responses": {
                "200": _json({}, f"the {which}'s JSON, sent chunked"),
                **_errors(400, 404, 409),
            },
        }
    }


_REASON = _body({"type": "object", "properties": {"reason": {"type": "string"}}})


def _action(op: str, summary: str, flag: str) -> dict[str, Any]:
    return {
        "post": {
            "operationId": op,
            "summary": summary,
            "security": _AUTH,
            "parameters": [_RUN_ID],
            "requestBody": _REASON,
            "responses": {
                "200": _json(
                    {
                        "type": "object",
                        "required": ["runId", flag],
                        "properties": {"runId": {"type": "string"}, flag: {"type": "boolean"}},
                    },
                    f"{flag}: false when the run had already ended",
                ),
                **_errors(400, 401, 403, 404, 413),
            },
        }
    }


def _schedule_action(op: str, summary: str, suspended: bool) -> dict[str, Any]:
    name = {"name": "name", "in": "path", "required": True, "schema": {"type": "string"}}
    answer = {
        "type": "object",
        "required": ["name", "suspended"],
        "properties": {"name": {"type": "string"}, "suspended": {"const": suspended}},
    }
    return {
        "post": {
            "operationId": op,
            "summary": summary,
            "security": _AUTH,
            "parameters": [name],
            "responses": {"200": _json(answer), **_errors(401, 403, 404, 503)},
        }
    }


def document() -> dict[str, Any]:
    nullable_number = {"type": ["number", "null"]}
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "Wayline console API",
            "version": "1",
            "description": "Runs, their events and streams, hooks; actions need the console's "
            "bearer token, and so does every request to a console started with "
            "--reads-need-token (docs/console.md). Every refusal is an Error body with a "
            "stable code.",
        },
        "paths": {
            "/api/info": {
                "get": {
                    "operationId": "info",
                    "summary": "whether actions are allowed, and the world served",
                    "responses": {"200": _json(_ref("Info"))},
                }
            },
            "/api/runs": {
                "get": {
                    "operationId": "listRuns",
                    "summary": "runs, newest first, a page at a time, with counts by status",
                    "parameters": [
                        {
                            "name": "status",
                            "in": "query",
                            "schema": {"type": "string", "enum": [s.value for s in RunStatus]},
                        },
                        {"name": "workflow", "in": "query", "schema": {"type": "string"}},
                        {
                            "name": "where",
                            "in": "query",
                            "description": "a search attribute expression (tenant=acme, "
                            "amount>100); repeated, all of them hold",
                            "schema": {"type": "string"},
                        },
                        {
                            "name": "limit",
                            "in": "query",
                            "schema": {"type": "integer", "minimum": 1, "maximum": 500},
                        },
                        {
                            "name": "cursor",
                            "in": "query",
                            "description": "the nextCursor of the page before",
                            "schema": {"type": "string"},
                        },
                    ],
                    "responses": {"200": _json(_ref("RunPage")), **_errors(400)},
                },
                "post": {
                    "operationId": "startRun",
                    "summary": "start a run of a workflow by its name",
                    "security": _AUTH,
                    "requestBody": _body(_ref("StartRequest"), required=True),
                    "responses": {
                        "201": _json(
                            {
                                "type": "object",
                                "required": ["runId"],
                                "properties": {"runId": {"type": "string"}},
                            },
                            "started (or, with an id, the run already started with it)",
                        ),
                        **_errors(400, 401, 403, 409, 413, 422),
                    },
                },
            },
            "/api/live": {
                "get": {
                    "operationId": "live",
                    "summary": "server-sent change events: read the runs (or the run) again",
                    "parameters": [{"name": "run", "in": "query", "schema": {"type": "string"}}],
                    "responses": {"200": _sse("event: change, data: {runId}"), **_errors(404)},
                }
            },
            "/api/runs/{run_id}": {
                "get": {
                    "operationId": "getRun",
                    "summary": "a run, folded from its log: steps, hooks, waits, children",
                    "parameters": [_RUN_ID],
                    "responses": {"200": _json(_ref("RunDetail")), **_errors(400, 404, 409)},
                }
            },
            "/api/runs/{run_id}/events": {
                "get": {
                    "operationId": "listEvents",
                    "summary": "a page of a run's event log, in order, after a cursor: "
                    "without parameters the first page and a cursor (a client written "
                    "before the pages gets a run of up to "
                    f"{EVENTS_FIRST_PAGE} events whole, as before)",
                    "parameters": [
                        _RUN_ID,
                        *_paged(
                            "a page's nextCursor given before, or any event's seq (the page "
                            "starts after it: a cursor still names the same place after more "
                            "events are appended); 0 or none: from the first. The newest n "
                            "events are the page after eventCount - n. One past the run's last "
                            "event is a 400",
                            EVENTS_FIRST_PAGE,
                            EVENTS_MAX_PAGE,
                        ),
                    ],
                    "responses": {"200": _json(_ref("EventPage")), **_errors(400, 404, 409)},
                }
            },
            "/api/runs/{run_id}/steps": {
                "get": {
                    "operationId": "listSteps",
                    "summary": "a page of a run's steps, in the log's order, after a cursor",
                    "parameters": [
                        _RUN_ID,
                        {
                            "name": "after",
                            "in": "query",
                            "description": "a nextStepCursor or nextCursor given before",
                            "schema": {"type": "string"},
                        },
                        {
                            "name": "limit",
                            "in": "query",
                            "schema": {"type": "integer", "minimum": 1, "maximum": 1000},
                        },
                        {
                            "name": "group",
                            "in": "query",
                            "description": "a step name (a stepGroups entry's): its occurrences "
                            "alone, paged the same way (stepCount: how many)",
                            "schema": {"type": "string"},
                        },
                    ],
                    "responses": {"200": _json(_ref("StepPage")), **_errors(400, 404, 409)},
                }
            },
            "/api/runs/{run_id}/steps/{step}/result": _linked(
                "getStepResult",
                "a step's result as JSON (null while it has none), streamed in chunks (from "
                "the blob store when it is stored out of line); a step's resultPayload links a "
                "large one here",
                "result",
                _in_path("step", "the step's id (a step's id in the run's JSON)", _ID),
            ),
            "/api/runs/{run_id}/hooks": {
                "get": {
                    "operationId": "listRunHooks",
                    "summary": "a page of a run's hooks, in the order they were made, after a "
                    "cursor: the run's JSON carries its first and last hooks alone",
                    "parameters": [
                        _RUN_ID,
                        *_paged(
                            "the run's nextHookCursor or a page's nextCursor given before (the "
                            "number of the next hook: a cursor still names the same hook after "
                            "more are made); 0 or none: from the first. One past the hooks the "
                            "run has is a 400",
                            HOOKS_FIRST_PAGE,
                            HOOKS_MAX_PAGE,
                        ),
                    ],
                    "responses": {"200": _json(_ref("HookPage")), **_errors(400, 404, 409)},
                }
            },
            "/api/runs/{run_id}/hooks/{hook}/payloads": {
                "get": {
                    "operationId": "listHookPayloads",
                    "summary": "a page of a hook's payloads, in the order they came, after a "
                    "cursor: the run's JSON carries a hook's first and last ones alone",
                    "parameters": [
                        _RUN_ID,
                        _in_path("hook", "the hook's id (a hook's id in the run's JSON)", _ID),
                        *_paged(
                            "a hook's nextPayloadCursor or a page's nextCursor given before "
                            "(the number of the next payload: a cursor still names the same "
                            "payload after more arrive); 0 or none: from the first. One past the "
                            "payloads the hook has is a 400",
                            HOOK_PAYLOADS_FIRST_PAGE,
                            HOOK_PAYLOADS_MAX_PAGE,
                        ),
                    ],
                    "responses": {
                        "200": _json(_ref("HookPayloadPage")),
                        **_errors(400, 404, 409),
                    },
                }
            },
            "/api/runs/{run_id}/hooks/{hook}/payloads/{n}": _linked(
                "getHookPayload",
                "a hook's payload as JSON, streamed in chunks (from the blob store when it is "
                "stored out of line); a hook's payloadPayload (and each later payload's) links "
                "a large one here",
                "payload",
                _in_path("hook", "the hook's id (a hook's id in the run's JSON)", _ID),
                _in_path(
                    "n",
                    "which payload: 0 the first, 1 the first of later...",
                    {"type": "integer", "minimum": 0, "maximum": 10**PAYLOAD_NUMBER_DIGITS - 1},
                ),
            ),
            "/api/runs/{run_id}/input": _payload("getRunInput", "input"),
            "/api/runs/{run_id}/output": _payload("getRunOutput", "output"),
            "/api/runs/{run_id}/cancel": _action(
                "cancelRun", "ask a run to stop; its compensations run", "cancelled"
            ),
            "/api/runs/{run_id}/terminate": _action(
                "terminateRun", "stop a run now, without its compensations", "terminated"
            ),
            "/api/runs/{run_id}/streams/{name}": {
                "get": {
                    "operationId": "readStream",
                    "summary": "what a run's steps write to a stream, as server-sent events",
                    "parameters": [
                        _RUN_ID,
                        {
                            "name": "name",
                            "in": "path",
                            "required": True,
                            "schema": {"type": "string"},
                        },
                        {
                            "name": "start",
                            "in": "query",
                            "schema": {"type": "integer", "minimum": 0},
                        },
                        {"name": "follow", "in": "query", "schema": {"type": "boolean"}},
                    ],
                    "responses": {
                        "200": _sse(
                            "event: data or restart (id: the index), data: {data, stepId, "
                            "attempt}; a last event: end"
                        ),
                        **_errors(400, 404),
                    },
                }
            },
            "/api/hooks": {
                "get": {
                    "operationId": "listHooks",
                    "summary": "the hooks live runs wait on, oldest first",
                    "parameters": [{"name": "run", "in": "query", "schema": {"type": "string"}}],
                    "responses": {
                        "200": _json(
                            {
                                "type": "object",
                                "required": ["hooks"],
                                "properties": {"hooks": {"type": "array", "items": _ref("Hook")}},
                            }
                        ),
                        **_errors(400, 404),
                    },
                }
            },
            "/api/workers": {
                "get": {
                    "operationId": "listWorkers",
                    "summary": "what workers serve, and the live runs no live worker can drive",
                    "responses": {"200": _json(_ref("Workers"))},
                }
            },
            "/api/schedules": {
                "get": {
                    "operationId": "listSchedules",
                    "summary": "the schedules of `wayline schedules`: next ticks, last runs",
                    "responses": {
                        "200": _json(
                            {
                                "type": "object",
                                "required": ["file", "schedules"],
                                "properties": {
                                    "file": {"type": ["string", "null"]},
                                    "schedules": {"type": "array", "items": _ref("Schedule")},
                                },
                            }
                        ),
                        **_errors(503),
                    },
                }
            },
            "/api/schedules/{name}/suspend": _schedule_action(
                "suspendSchedule", "start none of the schedule's ticks until it is resumed", True
            ),
            "/api/schedules/{name}/resume": _schedule_action(
                "resumeSchedule", "start its ticks again (the latest one missed first)", False
            ),
            "/api/hooks/{token}/resume": {
                "post": {
                    "operationId": "resumeHook",
                    "summary": "deliver a payload to the hook holding the token",
                    "security": _AUTH,
                    "parameters": [
                        {
                            "name": "token",
                            "in": "path",
                            "required": True,
                            "schema": {"type": "string"},
                        },
                        {
                            "name": "Idempotency-Key",
                            "in": "header",
                            "description": "the delivery id: a retry with it delivers once",
                            "schema": {"type": "string"},
                        },
                    ],
                    "requestBody": _body(
                        {"type": "object", "required": ["payload"], "properties": {"payload": {}}},
                        required=True,
                    ),
                    "responses": {
                        "200": _json(
                            {
                                "type": "object",
                                "required": ["runId"],
                                "properties": {"runId": {"type": "string"}},
                            }
                        ),
                        **_errors(400, 401, 403, 404, 409, 413, 422),
                    },
                }
            },
            "/hooks/{token}/webhook": {
                "post": {
                    "operationId": "webhook",
                    "summary": "resume a hook created with webhook=True, once; the URL's "
                    "signature is the credential (no bearer token)",
                    "parameters": [
                        {
                            "name": "token",
                            "in": "path",
                            "required": True,
                            "schema": {"type": "string"},
                        },
                        {
                            "name": "sig",
                            "in": "query",
                            "required": True,
                            "description": "the signature the hook's webhook_url carries",
                            "schema": {"type": "string"},
                        },
                        {
                            "name": "Idempotency-Key",
                            "in": "header",
                            "description": "the delivery id: a retry with it answers as the "
                            "first POST did and delivers nothing more",
                            "schema": {"type": "string"},
                        },
                    ],
                    "requestBody": _body({"description": "the payload, any JSON"}, required=True),
                    "responses": {
                        "200": _json(
                            {
                                "type": "object",
                                "required": ["runId"],
                                "properties": {"runId": {"type": "string"}},
                            }
                        ),
                        **_errors(400, 403, 404, 409, 413, 422, 503),
                    },
                }
            },
        },
        "components": {
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
            "responses": {"Error": _json(_ref("Error"), "refused: the body says why")},
            "schemas": {
                "Error": {
                    "type": "object",
                    "required": ["error"],
                    "properties": {
                        "error": {
                            "type": "object",
                            "required": ["code", "message"],
                            "properties": {
                                "code": {"type": "string", "examples": ["RUN_NOT_FOUND"]},
                                "message": {"type": "string"},
                            },
                        }
                    },
                },
                "Info": {
                    "type": "object",
                    "required": ["readOnly", "world"],
                    "properties": {"readOnly": {"type": "boolean"}, "world": {"type": "string"}},
                },
                "Run": {
                    "type": "object",
                    "required": ["runId", "workflow", "status", "createdAt"],
                    "properties": {
                        "runId": {"type": "string"},
                        "businessId": {"type": ["string", "null"]},
                        "workflow": {"type": "string"},
                        "status": {"type": "string", "enum": [s.value for s in RunStatus]},
                        "input": {},
                        "output": {},
                        "error": {"type": ["object", "null"]},
                        "createdAt": {"type": "number"},
                        "startedAt": nullable_number,
                        "endedAt": nullable_number,
                        "updatedAt": nullable_number,
                        "attributes": {"type": "object"},
                    },
                },
                "RunPage": {
                    "type": "object",
                    "required": ["runs", "nextCursor", "counts", "countsPartial"],
                    "properties": {
                        "runs": {"type": "array", "items": _ref("Run")},
                        "nextCursor": {"type": ["string", "null"]},
                        "counts": {"type": "object", "additionalProperties": {"type": "integer"}},
                        "countsPartial": {
                            "type": "boolean",
                            "description": "the counts are of the runs read so far: the "
                            "server is still loading its runs (ask again)",
                        },
                    },
                },
                "RunDetail": {
                    "allOf": [
                        _ref("Run"),
                        {
                            "type": "object",
                            "properties": {
                                "steps": {
                                    "type": "array",
                                    "items": {"type": "object"},
                                    "description": "the first steps; the rest from /steps",
                                },
                                "stepCount": {"type": "integer"},
                                "nextStepCursor": {
                                    "type": ["string", "null"],
                                    "description": "after= for /steps; null: every step is here",
                                },
                                "stepGroups": {
                                    "type": "array",
                                    "items": _ref("StepGroup"),
                                    "description": "every step name called more than once, "
                                    "in the order of its first call; its steps from "
                                    "/steps?group=",
                                },
                                "hooks": {
                                    "type": "array",
                                    "items": {"type": "object"},
                                    "description": "a payload over 4096 bytes of JSON (the "
                                    "first, or one of later) is null here, with payloadPayload "
                                    "(a LargePayload) linking "
                                    "/api/runs/{run_id}/hooks/{hook}/payloads/{n}. A hook "
                                    "carries its first payload (payload), the next ones (up to "
                                    f"its first {HEAD_PAYLOADS} in all) in later, its last "
                                    f"{TAIL_PAYLOADS} "
                                    "past those in lastPayloads (each a HookPayload), with "
                                    "payloadCount and nextPayloadCursor: after= for "
                                    "/api/runs/{run_id}/hooks/{hook}/payloads, the first "
                                    "payload not carried (null: every one is here). The "
                                    f"hooks of a run carry at most {RUN_PAYLOADS} payloads "
                                    "past their first ones together: the hooks past that "
                                    "budget carry fewer, down to their first alone. A run "
                                    f"carries its first {HEAD_HOOKS} hooks, up to "
                                    f"{WAITING_HOOKS} waiting ones after those, and its last "
                                    f"{TAIL_HOOKS}, each with its number n (0 the first); the "
                                    "rest from /api/runs/{run_id}/hooks",
                                },
                                "hookCount": {
                                    "type": "integer",
                                    "description": "how many hooks the run has made",
                                },
                                "nextHookCursor": {
                                    "type": ["string", "null"],
                                    "description": "after= for /hooks: the first hook not "
                                    "carried; null: every hook is here",
                                },
                                "waits": {"type": "array", "items": {"type": "object"}},
                                "children": {"type": "array", "items": {"type": "object"}},
                                "terminated": {"type": "boolean"},
                                "waitingForWorker": {"type": ["string", "null"]},
                                "archived": {
                                    "type": "boolean",
                                    "description": "read from the archive (wayline archive): "
                                    "its payloads stream from where the archive keeps them",
                                },
                                "story": {
                                    "type": "string",
                                    "description": "the timeline `wayline runs show` prints",
                                },
                                "eventCount": {"type": "integer"},
                                "inputPayload": _ref("LargePayload"),
                                "outputPayload": _ref("LargePayload"),
                            },
                        },
                    ]
                },
                "LargePayload": {
                    "type": ["object", "null"],
                    "description": "an input or output over 65536 bytes of JSON (a step's "
                    "result or a hook's payload over 4096), which the run's JSON gives as "
                    "null: its size, its first 1024 bytes, and the link that streams it; null "
                    "when the value is inline. error: why the value cannot be read (its blob "
                    "is gone, or its reference is malformed), the link's own error; the "
                    "preview is then empty. A smaller value kept in a blob that cannot be read "
                    "is given so too, so the rest of the run is still shown",
                    "required": ["bytes", "preview", "href"],
                    "properties": {
                        "bytes": {"type": "integer"},
                        "preview": {"type": "string"},
                        "href": {"type": "string"},
                        "error": {
                            "type": "object",
                            "properties": {
                                "code": {"type": "string"},
                                "message": {"type": "string"},
                            },
                        },
                    },
                },
                "StepGroup": {
                    "type": "object",
                    "required": ["name", "count", "first", "statuses"],
                    "properties": {
                        "name": {"type": "string"},
                        "count": {"type": "integer", "description": "how many times it ran"},
                        "first": {
                            "type": "integer",
                            "description": "the position of its first call among the steps",
                        },
                        "statuses": {
                            "type": "object",
                            "additionalProperties": {"type": "integer"},
                            "description": "how many occurrences are in each status",
                        },
                    },
                },
                "EventPage": _page(
                    "events",
                    {"type": "array", "items": {"type": "object"}},
                    "eventCount",
                    "how many events the run's log has (its last seq)",
                    "the run's last event (a later read after the last event's seq finds what "
                    "came since)",
                ),
                "HookPage": _page(
                    "hooks",
                    {
                        "type": "array",
                        "items": {"type": "object"},
                        "description": "as the run's JSON carries them, with their number n",
                    },
                    "hookCount",
                    "how many hooks the run has made",
                    "the run's last hook",
                ),
                "HookPayloadPage": _page(
                    "payloads",
                    {"type": "array", "items": _ref("HookPayload")},
                    "payloadCount",
                    "how many payloads the hook has received",
                    "the hook's last payload",
                ),
                "HookPayload": {
                    "type": "object",
                    "required": ["n", "receivedAt", "payload", "payloadPayload"],
                    "properties": {
                        "n": {"type": "integer", "description": "its number: 0 the first"},
                        "receivedAt": {"type": "number"},
                        "payload": {"description": "null when over 4096 bytes of JSON"},
                        "payloadPayload": _ref("LargePayload"),
                    },
                },
                "StepPage": {
                    "type": "object",
                    "required": ["steps", "stepCount", "nextCursor"],
                    "properties": {
                        "steps": {
                            "type": "array",
                            "items": {"type": "object"},
                            "description": "a result over 4096 bytes of JSON is null here, "
                            "with its size in resultBytes and resultPayload (a LargePayload) "
                            "linking /api/runs/{run_id}/steps/{step}/result",
                        },
                        "stepCount": {"type": "integer"},
                        "nextCursor": {"type": ["string", "null"]},
                    },
                },
                "Workers": {
                    "type": "object",
                    "required": ["now", "served", "waiting"],
                    "properties": {
                        "now": {"type": "number"},
                        "served": {
                            "type": "array",
                            "items": {
                                "type": "object",
                                "required": ["workflow", "live"],
                                "properties": {
                                    "workflow": {"type": "string"},
                                    "identity": {"type": "string"},
                                    "revision": {"type": ["integer", "string", "null"]},
                                    "queue": {"type": ["string", "null"]},
                                    "workers": {
                                        "type": "object",
                                        "additionalProperties": {"type": "number"},
                                    },
                                    "seenAt": {"type": "number"},
                                    "liveUntil": {"type": "number"},
                                    "live": {"type": "boolean"},
                                    "ready": {
                                        "type": ["integer", "null"],
                                        "description": "messages ready on the routes its "
                                        "workers take (null: the world cannot tell)",
                                    },
                                    "oldestReadyAt": nullable_number,
                                },
                            },
                        },
                        "queues": {
                            "type": ["array", "null"],
                            "description": "every topic with a ready message",
                            "items": {
                                "type": "object",
                                "required": ["topic", "ready", "oldestReadyAt"],
                                "properties": {
                                    "topic": {"type": "string"},
                                    "ready": {"type": "integer"},
                                    "oldestReadyAt": {"type": "number"},
                                },
                            },
                        },
                        "waiting": {
                            "type": "array",
                            "items": {
                                "allOf": [
                                    _ref("Run"),
                                    {"type": "object", "properties": {"why": {"type": "string"}}},
                                ]
                            },
                        },
                    },
                },
                "Schedule": {
                    "type": "object",
                    "required": ["name", "cron", "workflow", "next"],
                    "properties": {
                        "name": {"type": "string"},
                        "cron": {"type": "string"},
                        "timeZone": {"type": "string"},
                        "workflow": {"type": "string"},
                        "concurrencyPolicy": {"type": "string"},
                        "lastTick": nullable_number,
                        "next": {"type": "string", "description": "ISO time, or - when none"},
                        "invalid": {"type": "string"},
                        "suspended": {
                            "type": "boolean",
                            "description": "present (true) while no tick starts",
                        },
                        "lastRunId": {"type": ["string", "null"]},
                        "lastRunStatus": {"type": ["string", "null"]},
                    },
                },
                "StartRequest": {
                    "type": "object",
                    "required": ["workflow"],
                    "properties": {
                        "workflow": {"type": "string"},
                        "args": {"type": "array"},
                        "kwargs": {"type": "object"},
                        "id": {"type": "string", "description": "a business id"},
                        "queue": {"type": "string"},
                    },
                },
                "Hook": {
                    "type": "object",
                    "required": ["token", "runId", "workflow", "hookId", "status"],
                    "properties": {
                        "token": {"type": "string"},
                        "runId": {"type": "string"},
                        "workflow": {"type": "string"},
                        "hookId": {"type": "string"},
                        "status": {"type": "string", "enum": ["waiting", "received"]},
                        "createdAt": {"type": "number"},
                        "timeoutAt": nullable_number,
                        "type": {"type": ["string", "null"]},
                        "shape": {
                            "type": ["object", "null"],
                            "description": "a typed hook's recorded shape, which its form is "
                            "built from: required, fields (each one's JSON types), nested "
                            "(models, with the model's title where the field may also be a "
                            "plain value or a list), unions (branches, and a discriminated "
                            "union's tag), items (a list's item: a shape, a union, the kinds "
                            "and a literal's values of a plain value, or a list, whose item is "
                            "said the same way, or options, one of these each for an item that "
                            "may be several kinds of thing) and values (a Literal field's "
                            "values)",
                        },
                        "metadata": {},
                    },
                },
            },
        },
    }
