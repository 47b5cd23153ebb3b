"""Webhook URLs on every world, through the console's real HTTP server: a hook created with
``webhook=True`` carries a signed URL under WAYLINE_CONSOLE_URL; a POST of JSON to it resumes
the hook once (a retry under the same Idempotency-Key answers the same, another delivery is
refused), and bad input is refused with a typed body while the run keeps waiting."""

from __future__ import annotations

import asyncio
import socket
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pydantic
import pytest

import wayline
from tests.runtime.harness import Engine, wait_for
from wayline._core.events import EventType
from wayline._sdk.webhooks import signature, verify
from wayline.cli.console import create_app, server
from wayline.cli.loading import UsageError
from wayline.cli.web import webhook_secrets

SECRET = "webhook-test-key-0123456789"


class Shipping(pydantic.BaseModel):
    approved: bool
    by: str


_URLS: dict[str, str | None] = {}


@wayline.step(name="webhooks.publish")
async def publish(key: str, url: str | None) -> None:
    _URLS[key] = url


@wayline.workflow(name="webhooks.typed")
async def typed(key: str) -> str:
    hook = wayline.create_hook(f"ship/{key}", type=Shipping, webhook=True)
    await publish(key, hook.webhook_url)
    approval = await hook
    return f"approved={approval.approved} by {approval.by}"


@wayline.workflow(name="webhooks.once")
async def once(key: str) -> Any:
    hook = wayline.create_hook(f"pay:{key}", webhook=True)
    await publish(key, hook.webhook_url)
    first = await hook
    # The webhook's hook stays open (it is never disposed) while the run waits on another:
    # a second delivery to it would be taken, were the webhook not once.
    await wayline.create_hook(f"done:{key}")
    return first


@wayline.workflow(name="webhooks.unconfigured")
async def unconfigured(key: str) -> str:
    hook = wayline.create_hook(f"nokey:{key}", webhook=True)
    return str(await hook)


@dataclass
class Served:
    engine: Engine
    http: httpx.AsyncClient
    base: str


@pytest.fixture
async def served(engine: Engine, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Served]:
    """The console on 127.0.0.1 over HTTP, its address and key given to the workers as a
    deployment would (the environment)."""
    sock = socket.create_server(("127.0.0.1", 0))
    base = f"http://127.0.0.1:{sock.getsockname()[1]}"
    monkeypatch.setenv("WAYLINE_CONSOLE_URL", base + "/")
    monkeypatch.setenv("WAYLINE_WEBHOOK_SECRET", SECRET)
    closing = asyncio.Event()
    app = create_app(
        engine.client, world_url="test://world", closing=closing, webhook_secrets=(SECRET,)
    )
    running = server(app)
    task = asyncio.create_task(running.serve(sockets=[sock]), name="webhooks-console")
    try:
        while not running.started:
            if task.done():
                task.result()
            await asyncio.sleep(0.01)
        async with httpx.AsyncClient(base_url=base) as http:
            yield Served(engine, http, base)
    finally:
        closing.set()
        running.should_exit = True
        await task
        sock.close()


async def _url(key: str) -> str:
    async def published() -> str | None:
        return _URLS.get(key)

    url: str = await wait_for(published)
    return url


def _error(response: httpx.Response) -> tuple[int, str]:
    return response.status_code, response.json()["error"]["code"]


async def test_a_webhook_url_resumes_its_hook_once(served: Served) -> None:
    key = uuid.uuid4().hex
    client = served.engine.client
    async with served.engine.worker([once]):
        handle = await client.start(once, key)
        url = await _url(key)
        token = f"pay:{key}"
        assert url == f"{served.base}/hooks/{quote(token, safe='')}/webhook?sig=" + signature(
            SECRET, token
        )
        first = await served.http.post(url, json={"amount": 12}, headers={"Idempotency-Key": "d1"})
        assert first.status_code == 200 and first.json() == {"runId": handle.run_id}
        again = await served.http.post(url, json={"amount": 12}, headers={"Idempotency-Key": "d1"})
        assert again.status_code == 200 and again.json() == first.json()
        other = await served.http.post(url, json={"amount": 99}, headers={"Idempotency-Key": "d2"})
        assert _error(other) == (409, "HOOK_NOT_FOUND")
        bare = await served.http.post(url, json={"amount": 7})
        assert _error(bare) == (409, "HOOK_NOT_FOUND")
        await client.wait_for_hook(f"done:{key}", timeout=10)  # the run reaches it after
        await client.resume_hook(f"done:{key}", None)
        assert await handle.result(timeout=10) == {"amount": 12}
    events = await client.handle(handle.run_id).events()
    assert [e.data["payload"] for e in events if e.type is EventType.HOOK_RECEIVED] == [
        {"amount": 12},
        None,
    ]


async def test_of_two_racing_webhook_deliveries_one_is_taken(served: Served) -> None:
    key = uuid.uuid4().hex
    client = served.engine.client
    async with served.engine.worker([once]):
        handle = await client.start(once, key)
        url = await _url(key)
        answers = await asyncio.gather(
            *(
                served.http.post(url, json={"n": n}, headers={"Idempotency-Key": f"race-{n}"})
                for n in range(4)
            )
        )
        assert sorted(a.status_code for a in answers) == [200, 409, 409, 409]
        await client.wait_for_hook(f"done:{key}", timeout=10)  # the run reaches it after
        await client.resume_hook(f"done:{key}", None)
        taken = [a for a in answers if a.status_code == 200]
        sent = answers.index(taken[0])
        assert await handle.result(timeout=10) == {"n": sent}


async def test_a_webhook_refuses_bad_input_and_the_run_keeps_waiting(served: Served) -> None:
    key = uuid.uuid4().hex
    client = served.engine.client
    async with served.engine.worker([typed]):
        handle = await client.start(typed, key)
        url = await _url(key)
        token = f"ship/{key}"
        path = f"/hooks/{quote(token, safe='')}/webhook"
        good = {"approved": True, "by": "grace"}
        forged = await served.http.post(path, params={"sig": "x" * 43}, json=good)
        assert _error(forged) == (403, "BAD_SIGNATURE")
        # a URL signed for another token does not open this one
        stolen = await served.http.post(path, params={"sig": signature(SECRET, "other")}, json=good)
        assert _error(stolen) == (403, "BAD_SIGNATURE")
        unknown = f"/hooks/nobody/webhook?sig={signature(SECRET, 'nobody')}"
        assert _error(await served.http.post(unknown, json=good)) == (404, "HOOK_NOT_FOUND")
        not_json = await served.http.post(url, content=b"approved=yes")
        assert _error(not_json) == (400, "BAD_REQUEST")
        empty = await served.http.post(url, content=b"")
        assert _error(empty) == (400, "BAD_REQUEST")
        huge = await served.http.post(url, content=b"[" + b"1," * (600 * 1024) + b"1]")
        assert _error(huge) == (413, "PAYLOAD_TOO_LARGE")
        wrong = await served.http.post(url, json={"approved": "maybe"})
        assert _error(wrong) == (422, "INVALID_PAYLOAD")
        assert "by" in wrong.json()["error"]["message"]
        waiting = await client.open_hooks(handle.run_id)
        assert [(h["token"], h["status"]) for h in waiting] == [(token, "waiting")]
        done = await served.http.post(url, json=good)
        assert done.status_code == 200
        assert await handle.result(timeout=10) == "approved=True by grace"


async def test_webhook_true_without_a_key_creates_no_hook(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("WAYLINE_WEBHOOK_SECRET", raising=False)
    monkeypatch.delenv("WAYLINE_WEBHOOK_SECRET_FILE", raising=False)
    monkeypatch.setenv("WAYLINE_CONSOLE_URL", "https://wayline.example.com")
    async with engine.worker([unconfigured]):
        handle = await engine.client.start(unconfigured, "k")
        with pytest.raises(wayline.errors.WaylineError) as raised:
            await handle.result(timeout=10)
    assert "WAYLINE_WEBHOOK_SECRET" in str(raised.value)
    assert await engine.client.open_hooks(handle.run_id) == []


async def test_a_console_without_a_key_refuses_every_webhook(served: Served) -> None:
    app = create_app(served.engine.client, world_url="test://world")
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
        answer = await http.post(f"/hooks/t/webhook?sig={signature(SECRET, 't')}", json=1)
    assert _error(answer) == (503, "CONFIGURATION_ERROR")


def test_keys_come_from_a_file_and_a_rotation_keeps_old_urls_until_the_old_key_goes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("WAYLINE_WEBHOOK_SECRET", raising=False)
    keys = tmp_path / "webhook-keys"
    keys.write_text("new-webhook-key-0123456789\nold-webhook-key-0123456789\n")
    monkeypatch.setenv("WAYLINE_WEBHOOK_SECRET_FILE", str(keys))
    secrets = webhook_secrets()
    assert secrets == ("new-webhook-key-0123456789", "old-webhook-key-0123456789")
    old_url_sig = signature("old-webhook-key-0123456789", "t")
    assert verify(secrets, "t", old_url_sig)  # during the rotation
    assert not verify(secrets[:1], "t", old_url_sig)  # once the old key is dropped
    assert not verify(secrets, "u", old_url_sig)  # never another token's

    keys.write_text("short\n")
    with pytest.raises(UsageError, match="fewer than 16"):
        webhook_secrets()
    monkeypatch.setenv("WAYLINE_WEBHOOK_SECRET_FILE", str(tmp_path / "absent"))
    with pytest.raises(UsageError, match="cannot be read"):
        webhook_secrets()
