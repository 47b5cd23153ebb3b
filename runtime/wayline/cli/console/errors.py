"""The console's error bodies: every refusal is ``{"error": {"code": ..., "message": ...}}``
with Wayline's stable code and an HTTP status chosen by what the caller can do about it.

A framework error keeps its own code (``RUN_NOT_FOUND``, ``INVALID_PAYLOAD``...); the few
refusals that only an HTTP server makes (a body that is not JSON, a missing token) have codes
of their own, listed in docs/console.md."""

from __future__ import annotations

from typing import Any

from starlette.responses import JSONResponse

from ...errors import WaylineError

# What a caller can do about each framework error decides its status: fix the request (4xx),
# or try again later (503). Codes not named here are a refusal of the request as given (400).
_STATUS = {
    "RUN_NOT_FOUND": 404,
    "HOOK_NOT_FOUND": 404,
    "WORKFLOW_NOT_FOUND": 404,
    "INVALID_ID": 400,
    "INVALID_PAYLOAD": 422,
    "SERIALIZATION_ERROR": 422,
    "PAYLOAD_TOO_LARGE": 413,
    "RUN_ALREADY_EXISTS": 409,
    "RUN_TERMINAL": 409,
    "ENTITY_CONFLICT": 409,
    "CORRUPT_LOG": 409,
    "WRONG_NAMESPACE": 403,
    "WORLD_UNAVAILABLE": 503,
    "STORE_FULL": 503,
}


class ApiError(Exception):
    """A refusal the server makes itself (``code`` is one of docs/console.md's)."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


def error_response(status: int, code: str, message: str, **headers: str) -> JSONResponse:
    body: dict[str, Any] = {"error": {"code": code, "message": message}}
    return JSONResponse(body, status_code=status, headers=headers or None)


def from_api_error(err: ApiError) -> JSONResponse:
    extra = {"WWW-Authenticate": "Bearer"} if err.status == 401 else {}
    return error_response(err.status, err.code, err.message, **extra)


def from_wayline_error(err: WaylineError) -> JSONResponse:
    known = err.details.get("known") if isinstance(err.details, dict) else None
    status = _STATUS.get(err.code, 400)
    if err.code == "HOOK_NOT_FOUND" and known:
        status = 409  # the hook was answered or its run ended: the token was right
    return error_response(status, err.code, err.message)
