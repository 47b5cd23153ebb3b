"""Bad input to the console's API gets a 4xx with a typed error body, never a 500, and
changes nothing: unknown runs and hooks, bad parameters, bodies that are not JSON objects,
bodies over the cap, routes and methods that do not exist."""

from __future__ import annotations

import httpx
import pytest

from tests.console.conftest import AUTH, TOKEN, Console
from wayline.cli.console import create_app
from wayline.cli.console.requests import MAX_BODY_BYTES

RUN = "wf_" + "0" * 32

CASES = [
    ("GET", f"/api/runs/{RUN}", None, 404, "RUN_NOT_FOUND"),
    ("GET", "/api/runs/order-9/events", None, 404, "RUN_NOT_FOUND"),
    ("GET", "/api/runs", {"status": "sleeping"}, 400, "BAD_REQUEST"),
    ("GET", "/api/runs", {"limit": "many"}, 400, "BAD_REQUEST"),
    ("GET", "/api/runs", {"limit": "0"}, 400, "BAD_REQUEST"),
    ("GET", "/api/runs", {"cursor": "not-a-cursor"}, 400, "BAD_REQUEST"),
    ("GET", f"/api/runs/{RUN}/streams/lines", {"start": "-1"}, 404, "RUN_NOT_FOUND"),
    ("GET", "/api/hooks", {"run": RUN}, 404, "RUN_NOT_FOUND"),
    ("GET", "/api/nothing", None, 404, "NOT_FOUND"),
    ("DELETE", "/api/runs", None, 405, "METHOD_NOT_ALLOWED"),
]


@pytest.mark.parametrize(("method", "path", "params", "status", "code"), CASES)
async def test_a_bad_read_is_a_typed_4xx(
    console: Console, method: str, path: str, params: dict[str, str] | None, status: int, code: str
) -> None:
    answer = await console.http.request(method, path, params=params)
    assert answer.status_code == status
    error = answer.json()["error"]
    assert error["code"] == code and error["message"]


BODIES = [
    (b"{not json", 400, "BAD_REQUEST"),
    (b"[1, 2]", 400, "BAD_REQUEST"),
    (b'{"workflow": 7}', 400, "BAD_REQUEST"),
    (b'{"workflow": "greet", "args": {"a": 1}}', 400, "BAD_REQUEST"),
    (b'{"workflow": "greet", "id": ""}', 400, "INVALID_ID"),
    (b"\xff\xfe", 400, "BAD_REQUEST"),
    (
        b'{"workflow": "greet", "args": ["' + b"x" * MAX_BODY_BYTES + b'"]}',
        413,
        "PAYLOAD_TOO_LARGE",
    ),
]


@pytest.mark.parametrize(("body", "status", "code"), BODIES, ids=lambda v: str(v)[:24])
async def test_a_bad_start_is_a_typed_4xx_and_starts_nothing(
    console: Console, body: bytes, status: int, code: str
) -> None:
    answer = await console.http.post("/api/runs", content=body, headers=AUTH)
    assert answer.status_code == status
    assert answer.json()["error"]["code"] == code
    assert await console.engine.client.list_runs() == []


async def test_a_bad_hook_resume_is_a_typed_4xx(console: Console) -> None:
    unknown = await console.http.post("/api/hooks/nobody/resume", json={"payload": 1}, headers=AUTH)
    assert unknown.status_code == 404
    assert unknown.json()["error"]["code"] == "HOOK_NOT_FOUND"
    no_payload = await console.http.post("/api/hooks/nobody/resume", json={}, headers=AUTH)
    assert no_payload.status_code == 400
    assert no_payload.json()["error"]["code"] == "BAD_REQUEST"
    no_run = await console.http.post(f"/api/runs/{RUN}/cancel", headers=AUTH)
    assert no_run.status_code == 404


async def test_the_body_cap_is_the_consoles_own(console: Console) -> None:
    app = create_app(console.engine.client, token=TOKEN, max_body_bytes=1024)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://small") as http:
        body = {"workflow": "greet", "args": ["x" * 1024]}
        answer = await http.post("/api/runs", json=body, headers=AUTH)
        assert answer.status_code == 413
        assert "over 1024 bytes" in answer.json()["error"]["message"]
    assert await console.engine.client.list_runs() == []
