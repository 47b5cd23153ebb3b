"""A run's log and its hooks a page at a time, on every world: ``/events`` answers at most a
page of events after a cursor, and a walk from cursor to cursor sees every event once and in
order while the run appends more; a run of 2,000 hooks keeps its JSON bounded (its first and
last hooks and their count), ``/runs/{id}/hooks`` pages through every hook, and the run page
loads the hooks it lacks when asked; bad cursors and limits are typed 400s, an unknown run a
404, and a console whose reads need its token asks for it here too (docs/console.md, "A run's
events" and "Runs with many hooks")."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from selenium.webdriver.remote.webdriver import WebDriver

import wayline
from tests.conftest import open_world_of_kind
from tests.console.browser import Page
from tests.console.conftest import AUTH, TOKEN, Console, served_page
from tests.console.test_hook_payload_pages import _resumed
from tests.console.test_read_token import _served
from tests.runtime.harness import Engine
from wayline._core.events import EventType, NewEvent
from wayline.cli.console import create_app

EVENTS = 2500
FIRST, MOST = 1000, 1000  # an /events page when it does not say, and the most it may ask
HEAD_HOOKS, TAIL_HOOKS = 50, 10  # the hooks the run's JSON carries (docs/console.md)
HOOKS = 2000


@wayline.workflow(name="event_hook_pages.many")
async def many(order: str) -> str:
    hooks = [wayline.create_hook(f"event_hook_pages:{order}:{i}") for i in range(HOOKS)]
    return str(await hooks[0])


async def test_events_come_a_page_at_a_time_and_a_walk_sees_each_once_while_more_come(
    console: Console,
) -> None:
    run_id, token = await _resumed(console, "events-e1", EVENTS)
    total = (await console.engine.client.world.get_run(run_id)).last_seq  # type: ignore[union-attr]
    assert total > EVENTS
    events = f"/api/runs/{run_id}/events"
    # a client written before the pages asks with no parameters: the first page and a cursor
    first = (await console.http.get(events)).json()
    assert [e["seq"] for e in first["events"]] == list(range(1, FIRST + 1))
    assert first["nextCursor"] == str(FIRST) and first["eventCount"] == total
    assert first["events"][0]["type"] == "run_created"

    walked: list[int] = []
    cursor: str | None = "0"
    arrived = 0
    while cursor is not None:
        page = (await console.http.get(events, params={"after": cursor, "limit": 777})).json()
        assert len(page["events"]) <= 777
        walked += [e["seq"] for e in page["events"]]
        cursor = page["nextCursor"]
        if arrived < 3:  # the run appends more while the walk goes on: its cursor still holds
            await console.engine.client.resume_hook(token, {"n": EVENTS + arrived, "text": "late"})
            arrived += 1
    assert walked == list(range(1, page["eventCount"] + 1))
    assert page["eventCount"] >= total + arrived
    received = [
        e["data"]["payload"]["n"]
        for e in page["events"]
        if e["type"] == "hook_received" and isinstance(e["data"].get("payload"), dict)
    ]
    assert received[-arrived:] == [EVENTS, EVENTS + 1, EVENTS + 2]
    # the newest events: the page after eventCount - n (the sequence is dense)
    count = page["eventCount"]
    tail = (await console.http.get(events, params={"after": count - 5})).json()
    assert [e["seq"] for e in tail["events"]] == list(range(count - 4, count + 1))
    end = (await console.http.get(events, params={"after": count})).json()
    assert end == {"events": [], "nextCursor": None, "eventCount": count}


async def test_bad_event_and_hook_cursors_and_limits_are_typed_400_and_an_unknown_run_404(
    console: Console,
) -> None:
    run_id, _ = await _resumed(console, "events-e2", 3)
    count = (await console.http.get(f"/api/runs/{run_id}/events")).json()["eventCount"]
    for path, past in ((f"/api/runs/{run_id}/events", count), (f"/api/runs/{run_id}/hooks", 1)):
        for params in (
            {"after": "x"},
            {"after": "-1"},
            {"after": str(past + 1)},  # past the run's end: no cursor this server gave
            {"after": "1" * 30},
            {"after": "٣"},  # a digit, but not an ASCII one
            {"limit": "0"},
            {"limit": str(MOST + 1)},
            {"limit": "many"},
        ):
            bad = await console.http.get(path, params=params)
            assert bad.status_code == 400, (path, params, bad.text)
            assert bad.json()["error"]["code"] == "BAD_REQUEST"
    for path in ("/api/runs/nosuchrun-e2/events", "/api/runs/nosuchrun-e2/hooks"):
        gone = await console.http.get(path)
        assert gone.status_code == 404, path
        assert gone.json()["error"]["code"] == "RUN_NOT_FOUND"
    # what a bad request asked for is not lost: the log still reads whole
    page = (await console.http.get(f"/api/runs/{run_id}/events")).json()
    assert [e["seq"] for e in page["events"]] == list(range(1, count + 1))
    assert page["nextCursor"] is None


async def test_event_and_hook_pages_need_the_token_when_reads_do(console: Console) -> None:
    run_id = (await console.engine.client.start("event-hook-pages-nobody-serves")).run_id
    async with _served(console, reads_need_token=True) as http:
        for path in (f"/api/runs/{run_id}/events", f"/api/runs/{run_id}/hooks"):
            refused = await http.get(path)
            assert refused.status_code == 401, path
            assert refused.json()["error"]["code"] == "UNAUTHORIZED"
            assert (await http.get(path, headers=AUTH)).status_code == 200, path
        shown = (await http.get(f"/api/runs/{run_id}/events", headers=AUTH)).json()
        assert [e["type"] for e in shown["events"]] == ["run_created"]


async def _many_hooks(console: Console, order: str, *, end: bool = True) -> str:
    """A run that made :data:`HOOKS` hooks; with ``end``, ended, so that none of them waits
    any more."""
    client = console.engine.client
    async with console.engine.worker([many]):
        handle = await client.start(many, order)
        await client.wait_for_hook(f"event_hook_pages:{order}:{HOOKS - 1}", timeout=60)
    if end:
        await client.terminate(handle.run_id, "enough hooks")
    return handle.run_id


@dataclass
class EndedRun:
    """The ended run of :data:`HOOKS` hooks that the tests which only read it share, and a
    console over a world of the test's own loop that reads its store."""

    console: Console
    run_id: str


@pytest.fixture(scope="module")
def _ended_run_stores(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Where each world kind's shared run is kept: a folder for the SQLite file, a prefix for
    the NATS streams, each kind's run id once it is built, and each kind's failed build."""
    prefix = f"ended{uuid.uuid4().hex[:12]}"  # the session's server may serve other processes
    folder = tmp_path_factory.mktemp("ended-many")
    return {"folder": folder, "prefix": prefix, "runs": {}, "failed": {}}


@pytest.fixture
async def ended_run(
    make_world: Any, request: pytest.FixtureRequest, _ended_run_stores: dict[str, Any]
) -> AsyncIterator[EndedRun]:
    """A run of 2,000 hooks that ended, built once per module and world (6-9 s each on
    NATS): the tests given it only read it. A world is bound to its test's event loop, so each
    test opens its own on the shared store (the module's SQLite file, or its NATS prefix). A
    build that failed is not started again: the later tests fail naming the first failure."""
    kind = request.node.callspec.params["make_world"]
    options = {} if kind == "local" else {"prefix": _ended_run_stores["prefix"]}
    world = await open_world_of_kind(request, _ended_run_stores["folder"], kind, options)
    try:
        engine = Engine(world=world, make_world=make_world, client=wayline.Client(world))
        app = create_app(engine.client, world_url="test://world", token=TOKEN, poll_seconds=0.05)
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://console") as http:
            console = Console(engine, http)
            runs, failed = _ended_run_stores["runs"], _ended_run_stores["failed"]
            if kind in failed:
                # a second build would start the same hooks' tokens over in the same store
                # and fail on them, hiding the first failure
                pytest.fail(
                    f"the shared run of {HOOKS} hooks on {kind} failed to build in "
                    f"{failed[kind]}; see that test's error",
                    pytrace=False,
                )
            if kind not in runs:
                try:
                    runs[kind] = await _many_hooks(console, "h1")
                except BaseException as err:
                    failed[kind] = f"{request.node.nodeid} ({type(err).__name__}: {err})"
                    raise
            yield EndedRun(console, runs[kind])
    finally:
        await world.close()


@pytest.fixture
async def ended_run_page(
    ended_run: EndedRun,
    chromium: WebDriver,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> AsyncIterator[Page]:
    """The ``page`` fixture over :func:`ended_run`'s console."""
    monkeypatch.chdir(tmp_path)
    async with served_page(ended_run.console, chromium, tmp_path) as opened:
        yield opened


def _tokens(hooks: list[dict[str, Any]], order: str) -> list[tuple[int, str]]:
    prefix = f"event_hook_pages:{order}:"
    return [(h["n"], h["token"].removeprefix(prefix)) for h in hooks]


async def test_a_run_of_2000_hooks_keeps_its_json_bounded_and_pages_every_hook(
    ended_run: EndedRun,
) -> None:
    console, run_id = ended_run.console, ended_run.run_id
    got = await console.http.get(f"/api/runs/{run_id}")
    assert got.status_code == 200, got.text[:300]
    run = got.json()
    assert run["hookCount"] == HOOKS
    shown = [*range(HEAD_HOOKS), *range(HOOKS - TAIL_HOOKS, HOOKS)]
    assert _tokens(run["hooks"], "h1") == [(n, str(n)) for n in shown]
    assert run["nextHookCursor"] == str(HEAD_HOOKS)
    # 60 hooks, not 2,000: the hooks' part of the run's JSON does not grow with them
    assert len(json.dumps(run["hooks"])) < 60_000, len(json.dumps(run["hooks"]))
    # and the story prints the same 60, saying how many it leaves out, so the whole run's
    # JSON stays under 100 KB (every hook's JSON and lines made it grow with each hook)
    assert f"... {HOOKS - HEAD_HOOKS - TAIL_HOOKS} more hooks" in run["story"]
    assert run["story"].count("event_hook_pages:h1:") == HEAD_HOOKS + TAIL_HOOKS
    assert len(got.content) < 100_000, len(got.content)

    walked: list[tuple[int, str]] = []
    cursor: str | None = "0"
    while cursor is not None:
        page = (
            await console.http.get(
                f"/api/runs/{run_id}/hooks", params={"after": cursor, "limit": 777}
            )
        ).json()
        walked += _tokens(page["hooks"], "h1")
        cursor = page["nextCursor"]
        assert page["hookCount"] == HOOKS
    assert walked == [(n, str(n)) for n in range(HOOKS)]
    default = (await console.http.get(f"/api/runs/{run_id}/hooks")).json()
    assert len(default["hooks"]) == 200 and default["nextCursor"] == "200"


async def test_a_run_of_2000_waiting_hooks_carries_50_more_of_them_for_the_page_s_forms(
    console: Console,
) -> None:
    """Every hook of the run waits: the run's JSON carries the first 50, the next 50 waiting
    ones (the run page answers them with its forms) and the last 10, still not 2,000."""
    run_id = await _many_hooks(console, "h3", end=False)
    run = (await console.http.get(f"/api/runs/{run_id}")).json()
    shown = [*range(2 * HEAD_HOOKS), *range(HOOKS - TAIL_HOOKS, HOOKS)]
    assert _tokens(run["hooks"], "h3") == [(n, str(n)) for n in shown]
    assert {h["status"] for h in run["hooks"]} == {"waiting"}
    assert run["hookCount"] == HOOKS and run["nextHookCursor"] == str(2 * HEAD_HOOKS)
    page = (
        await console.http.get(f"/api/runs/{run_id}/hooks", params={"after": 2 * HEAD_HOOKS})
    ).json()
    assert _tokens(page["hooks"], "h3")[0] == (2 * HEAD_HOOKS, str(2 * HEAD_HOOKS))


async def test_the_run_page_of_2000_hooks_says_how_many_more_and_loads_them(
    ended_run: EndedRun, ended_run_page: Page
) -> None:
    run_id, page = ended_run.run_id, ended_run_page
    await page.open(f"/runs/{run_id}")
    rows = "#timeline tr[data-kind^='hook']"
    more = f"#timeline tr[data-kind='hooks-more'][data-key='hooks@{HEAD_HOOKS}']"
    left = HOOKS - HEAD_HOOKS - TAIL_HOOKS
    await page.text(more, f"{left} more hooks")
    shown = await page.script(f'return document.querySelectorAll("{rows}").length')
    assert shown == HEAD_HOOKS + TAIL_HOOKS + 1  # the hooks carried, and the row for the rest
    await page.click(f"{more} button")
    after = HEAD_HOOKS + 200
    await page.text(
        f"#timeline tr[data-kind='hooks-more'][data-key='hooks@{after}']", f"{left - 200} more"
    )
    shown = await page.script(f'return document.querySelectorAll("{rows}").length')
    assert shown == HEAD_HOOKS + 200 + TAIL_HOOKS + 1


EARLY = 80


@wayline.workflow(name="event_hook_pages.grows")
async def grows(order: str) -> str:
    _ = [wayline.create_hook(f"event_hook_pages:{order}:{i}") for i in range(EARLY)]
    await wayline.create_hook(f"event_hook_pages:{order}:go")
    late = [wayline.create_hook(f"event_hook_pages:{order}:late{i}") for i in range(5)]
    return str(await late[-1])


async def test_the_run_page_keeps_the_hooks_it_drew_when_they_leave_the_run_json(
    console: Console, page: Page
) -> None:
    """The run's last hooks leave its JSON as it makes more: the open page keeps drawing them
    rather than fold them back into the "more hooks" row."""
    client = console.engine.client
    prefix = "event_hook_pages:h4"
    async with console.engine.worker([grows]):
        handle = await client.start(grows, "h4")
        await client.wait_for_hook(f"{prefix}:go", timeout=30)
    received = []
    for i in range(EARLY):  # the early hooks take a payload, so none of them waits
        hook = await client.world.get_hook(f"{prefix}:{i}")
        assert hook is not None
        received.append(NewEvent(EventType.HOOK_RECEIVED, hook.correlation_id, {"payload": i}))
    await client.world.append(handle.run_id, received)
    run = (await console.http.get(f"/api/runs/{handle.run_id}")).json()
    first_of_tail = EARLY + 1 - TAIL_HOOKS  # hooks 71 to 80 ("go"): the last ten of 81
    assert [h["n"] for h in run["hooks"]][HEAD_HOOKS] == first_of_tail
    kept = run["hooks"][HEAD_HOOKS]["id"]
    await page.open(f"/runs/{handle.run_id}")
    more = f"#timeline tr[data-kind='hooks-more'][data-key='hooks@{HEAD_HOOKS}']"
    await page.text(more, f"{first_of_tail - HEAD_HOOKS} more hooks")
    await page.text(f"#timeline tr[data-key='{kept}']", f"{prefix}:{first_of_tail}")

    async with console.engine.worker([grows]):
        await client.resume_hook(f"{prefix}:go", "go")
        await client.wait_for_hook(f"{prefix}:late4", timeout=30)
    now = (await console.http.get(f"/api/runs/{handle.run_id}")).json()
    assert now["hookCount"] == EARLY + 6 and kept not in [h["id"] for h in now["hooks"]]
    await page.text(f"#timeline tr[data-key='{now['hooks'][-1]['id']}']", f"{prefix}:late4")
    # the hook the page drew stays, and the row still counts the hooks it never read
    await page.text(f"#timeline tr[data-key='{kept}']", f"{prefix}:{first_of_tail}")
    await page.text(more, f"{first_of_tail - HEAD_HOOKS} more hooks")
