"""The console's HTTP API on every world: listing with filters, counts and cursors, a run as
``runs show`` tells it, actions behind the bearer token, typed hooks refused on the server,
and a stream read as server-sent events."""

from __future__ import annotations

import json
import uuid
from typing import Any

import httpx

from tests.console import flows
from tests.console.conftest import AUTH, Console
from tests.runtime.harness import wait_for
from wayline._core.events import EventType, NewEvent
from wayline._core.ids import new_run_id
from wayline.cli.console import create_app


async def _status(console: Console, run_id: str, status: str) -> dict[str, Any]:
    async def reached() -> dict[str, Any] | None:
        run: dict[str, Any] = (await console.http.get(f"/api/runs/{run_id}")).json()
        return run if run["status"] == status else None

    found: dict[str, Any] = await wait_for(reached)
    return found


async def test_runs_list_by_status_with_counts_and_a_cursor(console: Console) -> None:
    client = console.engine.client
    async with console.engine.worker([flows.greet]):
        done = [await client.start(flows.greet, f"n{i}") for i in range(3)]
        for handle in done:
            await handle.result(timeout=10)
    # nobody serves naps here: these two stay pending
    pending = [(await client.start("naps")).run_id for _ in range(2)]

    page = (await console.http.get("/api/runs", params={"status": "completed"})).json()
    assert sorted(r["runId"] for r in page["runs"]) == sorted(h.run_id for h in done)
    assert page["counts"] == {"completed": 3, "pending": 2}
    assert page["nextCursor"] is None
    naps = (await console.http.get("/api/runs", params={"workflow": "naps"})).json()
    assert sorted(r["runId"] for r in naps["runs"]) == sorted(pending)

    seen: list[str] = []
    cursor: str | None = None
    for _ in range(5):
        params = {"limit": "2", **({"cursor": cursor} if cursor else {})}
        page = (await console.http.get("/api/runs", params=params)).json()
        assert len(page["runs"]) <= 2
        seen += [r["runId"] for r in page["runs"]]
        cursor = page["nextCursor"]
        if cursor is None:
            break
    assert sorted(seen) == sorted([h.run_id for h in done] + pending)  # each once, none lost


async def test_a_run_reads_as_runs_show_tells_it(console: Console) -> None:
    async with console.engine.worker([flows.greet]):
        handle = await console.engine.client.start(flows.greet, "ana")
        assert await handle.result(timeout=10) == "hello ana"
    run = (await console.http.get(f"/api/runs/{handle.run_id}")).json()
    assert run["status"] == "completed" and run["output"] == "hello ana"
    assert [(s["name"], s["status"]) for s in run["steps"]] == [("console.hello", "completed")]
    assert "step console.hello" in run["story"] and 'result    "hello ana"' in run["story"]
    events = (await console.http.get(f"/api/runs/{handle.run_id}/events")).json()["events"]
    assert len(events) == run["eventCount"]
    assert events[0]["type"] == "run_created"


async def test_a_retried_step_shows_each_attempt_and_its_error(console: Console) -> None:
    async with console.engine.worker([flows.retries]):
        # a key of its own: the counter of tries is the process's, across both worlds
        handle = await console.engine.client.start(flows.retries, uuid.uuid4().hex)
        assert await handle.result(timeout=10) == "charged"
    run = (await console.http.get(f"/api/runs/{handle.run_id}")).json()
    [step] = run["steps"]
    assert [a["outcome"] for a in step["attempts"]] == ["retrying", "completed"]
    assert "the card service timed out" in step["attempts"][0]["error"]["message"]
    assert "attempt 1: failed" in run["story"]


async def test_actions_need_the_token_and_a_console_without_one_is_read_only(
    console: Console,
) -> None:
    async with console.engine.worker([flows.greet]):
        pass  # a worker has served greet: a start by its name is not a misspelling
    body = {"workflow": "greet", "args": ["bo"]}
    refused = await console.http.post("/api/runs", json=body)
    assert refused.status_code == 401
    assert refused.json()["error"]["code"] == "UNAUTHORIZED"
    # a header beyond ASCII (UTF-8 read as Latin-1 by the server) is a wrong token, not a 500
    for guess in (b"Bearer x", "Bearer \u00e9t\u00e9".encode(), b"Basic abc"):
        wrong = await console.http.post("/api/runs", json=body, headers={"Authorization": guess})
        assert wrong.status_code == 401
    unknown = await console.http.post("/api/runs", json={"workflow": "greeet"}, headers=AUTH)
    assert unknown.status_code == 404
    assert unknown.json()["error"]["code"] == "WORKFLOW_NOT_FOUND"
    assert (await console.engine.client.list_runs()) == []  # nothing was started

    started = await console.http.post("/api/runs", json=body, headers=AUTH)
    assert started.status_code == 201
    run_id = started.json()["runId"]
    async with console.engine.worker([flows.greet]):
        assert await console.engine.client.handle(run_id).result(timeout=10) == "hello bo"

    read_only = create_app(console.engine.client)
    transport = httpx.ASGITransport(app=read_only)
    async with httpx.AsyncClient(transport=transport, base_url="http://ro") as http:
        assert (await http.get("/api/info")).json()["readOnly"] is True
        answer = await http.post(f"/api/runs/{run_id}/cancel", headers=AUTH)
        assert answer.status_code == 403
        assert answer.json()["error"]["code"] == "READ_ONLY"
        assert (await http.get(f"/api/runs/{run_id}")).status_code == 200


async def test_cancel_and_terminate_with_the_token(console: Console) -> None:
    client = console.engine.client
    async with console.engine.worker([flows.naps]):
        first = await client.start(flows.naps)
        second = await client.start(flows.naps)
        await _status(console, first.run_id, "running")
        await _status(console, second.run_id, "running")
        asked = await console.http.post(
            f"/api/runs/{first.run_id}/cancel", json={"reason": "no longer needed"}, headers=AUTH
        )
        assert asked.json() == {"runId": first.run_id, "cancelled": True}
        await _status(console, first.run_id, "cancelled")
        again = await console.http.post(f"/api/runs/{first.run_id}/cancel", headers=AUTH)
        assert again.json()["cancelled"] is False  # it had ended
        ended = await console.http.post(f"/api/runs/{second.run_id}/terminate", headers=AUTH)
        assert ended.json() == {"runId": second.run_id, "terminated": True}
        run = await _status(console, second.run_id, "cancelled")
        assert run["terminated"] is True


async def test_a_typed_hook_refuses_a_bad_payload_and_keeps_waiting(console: Console) -> None:
    client = console.engine.client
    async with console.engine.worker([flows.approve]):
        handle = await client.start(flows.approve, "o7")
        await client.wait_for_hook("approve:o7", timeout=10)
        hooks = (await console.http.get("/api/hooks", params={"run": handle.run_id})).json()
        assert [(h["token"], h["type"]) for h in hooks["hooks"]] == [
            ("approve:o7", "tests.console.flows:Approval")
        ]
        url = "/api/hooks/approve:o7/resume"
        bad = await console.http.post(url, json={"payload": {"approved": "maybe"}}, headers=AUTH)
        assert bad.status_code == 422
        assert bad.json()["error"]["code"] == "INVALID_PAYLOAD"
        still = (await console.http.get("/api/hooks")).json()["hooks"]
        assert [h["status"] for h in still] == ["waiting"]  # the refusal lost nothing

        good = {"payload": {"approved": True, "by": "ana"}}
        key = {"Idempotency-Key": "delivery-1", **AUTH}
        first = await console.http.post(url, json=good, headers=key)
        assert first.json() == {"runId": handle.run_id}
        assert await handle.result(timeout=10) == "o7 shipped, approved by ana"
        retried = await console.http.post(url, json=good, headers=key)
        assert retried.json() == {"runId": handle.run_id}  # the same delivery: once
        later = await console.http.post(url, json=good, headers=AUTH)
        assert later.status_code == 409
        assert later.json()["error"]["code"] == "HOOK_NOT_FOUND"
    received = [e for e in await handle.events() if e.type == "hook_received"]
    assert len(received) == 1


async def test_a_stream_reads_as_server_sent_events(console: Console) -> None:
    async with console.engine.worker([flows.streams]):
        handle = await console.engine.client.start(flows.streams, 3)
        assert await handle.result(timeout=10) == 3
    answer = await console.http.get(
        f"/api/runs/{handle.run_id}/streams/lines", params={"start": "1"}
    )
    assert answer.headers["content-type"].startswith("text/event-stream")
    blocks = [b for b in answer.text.split("\n\n") if b.strip()]
    parsed = [dict(line.split(": ", 1) for line in b.splitlines()) for b in blocks]
    assert [(p.get("id"), p["event"]) for p in parsed] == [
        ("1", "data"),
        ("2", "data"),
        (None, "end"),
    ]
    assert [json.loads(p["data"]).get("data") for p in parsed[:2]] == [{"line": 1}, {"line": 2}]


async def test_workers_show_what_is_served_and_the_runs_nobody_can_drive(
    console: Console,
) -> None:
    client = console.engine.client
    async with console.engine.worker([flows.greet]):
        orphan = await client.start("naps")  # nobody serves naps here
        workers = (await console.http.get("/api/workers")).json()
        [greet] = [e for e in workers["served"] if e["workflow"] == "greet"]
        assert greet["live"] is True and len(greet["workers"]) == 1
        assert [(r["runId"], r["workflow"]) for r in workers["waiting"]] == [
            (orphan.run_id, "naps")
        ]
        assert "naps" in workers["waiting"][0]["why"]
    # a worker closed gracefully withdraws itself at once
    after = (await console.http.get("/api/workers")).json()
    assert [e["live"] for e in after["served"] if e["workflow"] == "greet"] == [False]


async def test_a_request_for_another_host_name_is_refused(console: Console) -> None:
    """A console told its host names (on loopback, ``wayline console`` is by default) answers
    no request naming another host: reads need no token, so a page elsewhere must not reach it
    through a name that resolves to 127.0.0.1."""
    app = create_app(console.engine.client, allowed_hosts=["127.0.0.1", "localhost"])
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8233") as http:
        assert (await http.get("/api/info")).status_code == 200
        rebound = await http.get("/api/runs", headers={"Host": "attacker.example:8233"})
        assert rebound.status_code == 400


def test_the_command_answers_loopback_names_alone_on_a_loopback_address() -> None:
    from wayline.cli.web import allowed_hosts

    assert allowed_hosts("127.0.0.1", None) == ["127.0.0.1", "localhost", "[::1]", "::1"]
    assert allowed_hosts("0.0.0.0", None) is None
    assert allowed_hosts("0.0.0.0", ["console.example"]) == ["console.example"]


async def test_runs_list_by_search_attribute_with_its_counts_and_cursor(console: Console) -> None:
    world = console.engine.client.world
    made: dict[str, list[str]] = {"acme": [], "globex": []}
    for i in range(5):
        tenant = "acme" if i % 2 == 0 else "globex"
        data = {"workflow": "console-attrs", "input": [i], "search": {"tenant": tenant}}
        events = [NewEvent(EventType.RUN_CREATED, data=data)]
        if i == 0:
            events.append(NewEvent(EventType.RUN_COMPLETED, data={"output": i}))
        run_id = new_run_id()
        await world.append(run_id, events, expected_seq=0)
        made[tenant].append(run_id)
    seen: list[str] = []
    params: dict[str, str] = {"where": "tenant=acme", "limit": "2"}
    for _ in range(3):
        page = (await console.http.get("/api/runs", params=params)).json()
        assert page["counts"] == {"completed": 1, "pending": 2}  # of acme's runs, every page
        seen += [r["runId"] for r in page["runs"]]
        if page["nextCursor"] is None:
            break
        params["cursor"] = page["nextCursor"]
    assert sorted(seen) == sorted(made["acme"])
    refused = await console.http.get("/api/runs", params={"where": "tenant=="})
    assert refused.status_code == 400, refused.text
