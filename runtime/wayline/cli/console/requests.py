"""Reading what a request asks for, refusing bad input with :class:`ApiError` before anything
is done: query parameters, the bearer token of an action, and a JSON body read no further
than its cap."""

from __future__ import annotations

import base64
import binascii
import hmac
import json
import math
from typing import Any

from starlette.requests import Request

from ..._core.events import RunStatus
from .errors import ApiError

MAX_BODY_BYTES = 1024 * 1024
"""The largest request body a console reads by default (1 MiB; ``--max-body-bytes``). The world
takes values up to 64 MiB (docs/hostile-input.md), but a server that anyone on the network can
reach should not buffer that much per request before it knows the request is any good: a
larger input or payload goes through ``wayline start`` or the client, or a raised cap."""


def status_param(request: Request) -> RunStatus | None:
    given = request.query_params.get("status")
    if not given:
        return None
    try:
        return RunStatus(given)
    except ValueError:
        known = ", ".join(s.value for s in RunStatus)
        raise ApiError(400, "BAD_REQUEST", f"unknown status {given!r} (one of {known})") from None


def int_param(request: Request, name: str, default: int, low: int, high: int) -> int:
    given = request.query_params.get(name)
    if given is None:
        return default
    try:
        value = int(given)
    except ValueError:
        raise ApiError(
            400, "BAD_REQUEST", f"{name} must be a whole number, not {given!r}"
        ) from None
    if not low <= value <= high:
        raise ApiError(400, "BAD_REQUEST", f"{name} must be from {low} to {high}, not {value}")
    return value


def encode_cursor(created_at: float, run_id: str) -> str:
    raw = json.dumps([created_at, run_id]).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(request: Request) -> tuple[float, str] | None:
    """The position after which a page starts: the newest-first order's last run shown."""
    given = request.query_params.get("cursor")
    if not given:
        return None
    try:
        raw = base64.urlsafe_b64decode(given + "=" * (-len(given) % 4))
        created_at, run_id = json.loads(raw)
        if isinstance(created_at, int | float) and isinstance(run_id, str):
            at = float(created_at)  # an int past a float's range: OverflowError
            if math.isfinite(at):  # a NaN or an infinity is no run's time
                return at, run_id
    except (binascii.Error, ValueError, TypeError, OverflowError):
        pass
    raise ApiError(400, "BAD_REQUEST", "cursor is not one this server gave (take nextCursor)")


def check_token(request: Request, token: str | None) -> None:
    """An action needs the console's bearer token; a console started without one is
    read-only."""
    if token is None:
        raise ApiError(
            403, "READ_ONLY", "this console is read-only (start it with --token-file to act)"
        )
    check_bearer(request, token, "an action needs the console's bearer token")


def check_bearer(request: Request, token: str, why: str) -> None:
    """The request's ``Authorization: Bearer`` is ``token``, else 401 ``UNAUTHORIZED``."""
    scheme, _, given = request.headers.get("authorization", "").partition(" ")
    # compare_digest: the time taken does not say how much of a guess was right. On bytes,
    # since on text it raises for a character outside ASCII, which a header may well hold.
    guess = given.strip().encode("utf-8", "surrogateescape")
    if scheme.lower() != "bearer" or not hmac.compare_digest(guess, token.encode()):
        raise ApiError(401, "UNAUTHORIZED", why)


async def raw_body(request: Request, max_bytes: int = MAX_BODY_BYTES) -> bytes:
    """The request's body, read in chunks and refused as soon as it passes ``max_bytes``,
    whatever Content-Length claims."""
    size, chunks = 0, []
    async for chunk in request.stream():
        size += len(chunk)
        if size > max_bytes:
            raise ApiError(413, "PAYLOAD_TOO_LARGE", f"the request body is over {max_bytes} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


def parse_json(raw: bytes) -> Any:
    try:
        return json.loads(raw)
    except (UnicodeDecodeError, ValueError) as err:
        raise ApiError(400, "BAD_REQUEST", f"the request body is not JSON: {err}") from None


async def json_body(request: Request, max_bytes: int = MAX_BODY_BYTES) -> dict[str, Any]:
    """The request's JSON object (an empty body is ``{}``), read no further than
    ``max_bytes``."""
    raw = await raw_body(request, max_bytes)
    if not raw.strip():
        return {}
    body = parse_json(raw)
    if not isinstance(body, dict):
        raise ApiError(400, "BAD_REQUEST", "the request body must be a JSON object")
    return body


def text_field(body: dict[str, Any], name: str, default: str | None = None) -> str | None:
    value = body.get(name, default)
    if value is not None and not isinstance(value, str):
        raise ApiError(400, "BAD_REQUEST", f"{name} must be a string")
    return value
