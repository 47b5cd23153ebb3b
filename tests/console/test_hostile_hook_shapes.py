"""Typed hooks whose class or recorded shape is hostile to the console, on every world: a union
that contains itself (an expression tree) still makes a hook a NATS message can hold, and the
console checks its payload by the recorded shape; a shape written into the log behind the
world's back, malformed in ways no writer makes, leaves the hooks page working for every other
hook; a hook payload whose small blob was removed behind the world's back is said at its place
while the run's page still opens."""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

import pydantic
import pytest

import wayline
from tests.blobs.stores import remove_blob
from tests.console.browser import Page
from tests.console.conftest import AUTH, TOKEN, Console, fresh_console
from tests.console.test_hook_forms import _received
from tests.console.test_large_step_results import refused_as
from tests.hostile.poison import forge_event


class Leaf(pydantic.BaseModel):
    op: Literal["leaf"]
    value: int


class Flip(pydantic.BaseModel):
    op: Literal["flip"]
    arg: Term


class Sum(pydantic.BaseModel):
    op: Literal["sum"]
    left: Term
    right: Term


class Difference(pydantic.BaseModel):
    op: Literal["difference"]
    left: Term
    right: Term


class Product(pydantic.BaseModel):
    op: Literal["product"]
    left: Term
    right: Term


class Quotient(pydantic.BaseModel):
    op: Literal["quotient"]
    left: Term
    right: Term


Term = Annotated[
    Leaf | Flip | Sum | Difference | Product | Quotient, pydantic.Field(discriminator="op")
]
for _node in (Flip, Sum, Difference, Product, Quotient):
    _node.model_rebuild()


class Sheet(pydantic.BaseModel):
    term: Term
    notes: list[Term] = []


def _value(term: Leaf | Flip | Sum | Difference | Product | Quotient) -> int:
    match term:
        case Leaf(value=value):
            return value
        case Flip(arg=arg):
            return -_value(arg)
        case Sum(left=left, right=right):
            return _value(left) + _value(right)
        case Difference(left=left, right=right):
            return _value(left) - _value(right)
        case Product(left=left, right=right):
            return _value(left) * _value(right)
        case Quotient(left=left, right=right):
            return _value(left) // _value(right)


@wayline.workflow(name="hostile_hook_shapes.sheet")
async def sheet(name: str) -> int:
    answer = await wayline.create_hook(f"hostile_hook_shapes.sheet:{name}", type=Sheet)
    return _value(answer.term)


async def _waiting(
    client: wayline.Client, workflow: Any, name: str, token: str
) -> wayline.RunHandle[Any]:
    """A run of ``workflow`` started and waiting on its hook's ``token``."""
    run = await client.start(workflow, name)
    await client.wait_for_hook(token, timeout=20)
    return run


@pytest.mark.parametrize("with_class", [True, False], ids=["class", "shape"])
async def test_a_hook_whose_class_is_a_union_that_contains_itself_is_created_and_checked(
    console: Console, monkeypatch: pytest.MonkeyPatch, with_class: bool
) -> None:
    """Its shape followed four levels deep was 1.4 MB: on NATS the ``hook_created`` append
    failed (maximum payload exceeded) at every delivery, and the run never waited."""
    if not with_class:  # a console that cannot import the class checks the recorded shape
        monkeypatch.setattr("wayline._sdk.hooks.find_type", lambda name, **_: None)
    client = console.engine.client
    token = f"hostile_hook_shapes.sheet:{with_class}"
    async with console.engine.worker([sheet]):
        run = await _waiting(client, sheet, str(with_class), token)
        (hook,) = (await console.http.get(f"/api/hooks?run={run.run_id}")).json()["hooks"]
        assert [b["value"] for b in hook["shape"]["unions"]["term"]["branches"]][:3] == [
            "leaf",
            "flip",
            "sum",
        ]
        url = f"/api/hooks/{token}/resume"
        two = {"op": "leaf", "value": 2}
        wrong = {"op": "sum", "left": {"op": "leaf"}, "right": two}
        refused = await console.http.post(url, json={"payload": {"term": wrong}}, headers=AUTH)
        assert refused.status_code == 422, refused.text
        why = refused.json()["error"]["message"]
        assert "term." in why and "left." in why and "value: Field required" in why
        assert await _received(console, run.run_id) == 0
        good = {"op": "flip", "arg": {"op": "product", "left": two, "right": {**two, "value": 3}}}
        resumed = await console.http.post(url, json={"payload": {"term": good}}, headers=AUTH)
        assert resumed.status_code == 200, resumed.text
        assert await run.result(timeout=20) == -6


SMALL_BLOB_CHARS = 2_000  # under 4 KiB, so sent inline in the run's JSON; over the threshold
LOW_INLINE_BYTES = 1_024  # a world told to keep anything over 1 KiB out of line


@wayline.step(name="hostile_hook_shapes.echo")
async def echo(text: str) -> str:
    return text


@wayline.workflow(name="hostile_hook_shapes.small_blobs")
async def small_blobs(name: str) -> int:
    payload = await wayline.create_hook(f"hostile_hook_shapes.small:{name}")
    return len(await echo(payload["text"]))


async def test_a_small_hook_payload_or_step_result_whose_blob_is_gone_is_said_at_its_place(
    console: Console,
) -> None:
    """A world with a low inline threshold keeps a 2 KB payload in a blob, which the run's
    JSON reads whole (it is under 4 KiB): when it was gone the whole run's JSON was a 409, so
    the run's page did not open. Now each is said at its place and its link answers 409."""
    low = await console.engine.make_world(inline_payload_bytes=LOW_INLINE_BYTES)
    client = wayline.Client(low)
    text = "s" * SMALL_BLOB_CHARS
    async with console.engine.worker([small_blobs], world=low):
        run = await client.start(small_blobs, "gone")
        await client.wait_for_hook("hostile_hook_shapes.small:gone", timeout=20)
        await client.resume_hook("hostile_hook_shapes.small:gone", {"text": text})
        assert await run.result(timeout=20) == SMALL_BLOB_CHARS
    await remove_blob(low, run.run_id, {"text": text})  # behind the world's back
    await remove_blob(low, run.run_id, text)
    async with fresh_console(console.engine, inline_payload_bytes=LOW_INLINE_BYTES) as http:
        response = await http.get(f"/api/runs/{run.run_id}")
        assert response.status_code == 200, response.text  # the run's page still opens
        shown = response.json()
        (hook,) = shown["hooks"]
        (step,) = shown["steps"]
        for linked in (hook["payloadPayload"], step["resultPayload"]):
            assert linked["error"]["code"] == "CORRUPT_LOG", linked
            gone = await http.get(linked["href"])
            assert gone.status_code == 409 and gone.json()["error"]["code"] == "CORRUPT_LOG"
        assert hook["payload"] is None and step["result"] is None


@wayline.workflow(name="hostile_hook_shapes.plain")
async def plain(name: str) -> str:
    return str(await wayline.create_hook(f"hostile_hook_shapes.plain:{name}"))


MARKUP = '<img src=x onerror="window.hostileHookShapes=1">'
"""A name from the log that would run script if the page wrote it as HTML."""

FORGED_SHAPE = {
    "required": ["pay", "lines", MARKUP],
    "fields": {"pay": ["object"], "lines": ["array"], MARKUP: ["string"], "note": ["string"]},
    "nested": {"note": "not a shape"},
    "unions": {
        "pay": {
            "tag": {"not": "a string"},
            "branches": [None, 5, {"title": MARKUP, "shape": {"fields": {"a": ["string"]}}}],
        }
    },
    "items": {"lines": {"union": {"branches": [None, {"shape": None}]}}, "note": []},
}
"""A shape no writer makes (a union's branch that is null or a number, a tag that is no
string, a list's union of nothing), with markup for a field's name and a branch's title."""


async def test_a_forged_shape_leaves_the_hooks_page_working_for_every_hook(
    console: Console, page: Page
) -> None:
    """A ``hook_created`` written into the log behind the world's back with a malformed shape:
    its union's null branch was a TypeError in the form's code, which ended the page's load,
    so no hook at all showed a form. Now each malformed part is a JSON text area, every other
    hook's form is built, and no name from the log is ever written as HTML."""
    client = console.engine.client
    async with console.engine.worker([sheet, plain]):
        typed = await _waiting(client, sheet, "beside", "hostile_hook_shapes.sheet:beside")
        forged = await _waiting(client, plain, "forged", "hostile_hook_shapes.plain:forged")
        created = {"token": "hostile_hook_shapes.forged", "type": "nowhere:Forged"}
        await forge_event(
            console.engine.world,
            forged.run_id,
            "hook_created",
            {**created, "shape": FORGED_SHAPE},
            cid="h-forged",
        )
        # its hook is listed after the forged one
        after = await _waiting(client, plain, "after", "hostile_hook_shapes.plain:after")
        await page.open("/hooks")
        await page.type("#token", TOKEN + "\t")
        await page.text('form[data-token="hostile_hook_shapes.sheet:beside"] label', "kind")
        await page.text('form[data-token="hostile_hook_shapes.plain:after"] button', "Resume")
        form = 'form[data-token="hostile_hook_shapes.forged"]'
        await page.text(f"{form} label", MARKUP)  # the name as text, not as an image
        assert await page.script(f"return document.querySelectorAll('{form} img').length") == 0
        assert await page.script("return window.hostileHookShapes === undefined")
        shown = await page.script(
            f"return [...document.querySelectorAll('{form} textarea')].map((t) => t.name)"
        )
        assert shown == ["pay", "lines"]  # the malformed union and list: JSON text areas
        said = await page.script("return document.getElementById('message').textContent")
        assert said == ""
        for run in (typed, after):
            assert (await client.get_run(run.run_id)).status == "running"


async def test_a_payload_number_is_refused_where_the_openapi_document_says(
    console: Console,
) -> None:
    """The document's ``n`` had no maximum while the server refused a number of ten digits
    with 400: a client checking against the document sent what the server would not read."""
    document = (await console.http.get("/api/openapi.json")).json()
    (n,) = [
        p
        for p in document["paths"]["/api/runs/{run_id}/hooks/{hook}/payloads/{n}"]["get"][
            "parameters"
        ]
        if p["name"] == "n"
    ]
    largest = n["schema"]["maximum"]
    client = console.engine.client
    async with console.engine.worker([plain]):
        run = await _waiting(client, plain, "numbers", "hostile_hook_shapes.plain:numbers")
    (hook,) = (await console.http.get(f"/api/runs/{run.run_id}")).json()["hooks"]
    base = f"/api/runs/{run.run_id}/hooks/{hook['id']}/payloads"
    # not numbers: a decimal, a sign, a space, an Arabic-Indic one (a digit, but not ASCII)
    wrong = ["1.0", "+1", "%20%31", "%D9%A1", str(largest + 1)]
    cases = {f"{base}/{n}": (400, "BAD_REQUEST") for n in wrong}
    cases |= {f"{base}/{n}": (404, "PAYLOAD_NOT_FOUND") for n in (0, largest)}  # none yet
    await refused_as(console, cases)


async def _forged_form(console: Console, page: Page, name: str, shape: dict[str, Any]) -> str:
    """A run of ``plain`` waiting, a ``hook_created`` with ``shape`` written into its log behind
    the world's back (token ``hostile_hook_shapes.<name>``), and the hooks page open: the
    forged hook's form's selector."""
    run = await _waiting(console.engine.client, plain, name, f"hostile_hook_shapes.plain:{name}")
    token = f"hostile_hook_shapes.{name}"
    await forge_event(
        console.engine.world,
        run.run_id,
        "hook_created",
        {"token": token, "type": f"nowhere:{name}", "shape": shape},
        cid=f"h-{name}",
    )
    await page.open("/hooks")
    await page.type("#token", TOKEN + "\t")
    return f'form[data-token="{token}"]'


PLAIN_FORGED_SHAPE = {
    "required": ["many", "blanks"],
    "fields": {
        "many": ["integer"],
        "blanks": ["array"],
        "odd": ["array"],
        "grid": ["array"],
    },
    "values": {"many": list(range(50_000))},
    "items": {
        "blanks": {"kinds": ["null"]},
        "odd": {"kinds": ["no such type", 7, None]},
        "grid": {"kinds": [["integer"]], "values": [[1, 2]]},
    },
}
"""Plain parts no writer makes: a literal of 50,000 values (a writer records 200 at most), a
list whose item can only be null but has no values, item kinds that name no JSON type, and a
list of lists given as kinds and values."""


async def test_a_forged_shape_with_plain_parts_leaves_a_form_that_sends(
    console: Console, page: Page
) -> None:
    """A list whose item kinds are only null gave each item no input, and Send threw a
    TypeError in the form's code, which said nothing and sent nothing; a literal of 50,000
    values was a choice of 50,000 options. Now such an item is null, the long literal is its
    field's typed input, and the form sends the payload."""
    async with console.engine.worker([plain]):
        form = await _forged_form(console, page, "plain-forged", PLAIN_FORGED_SHAPE)
        kind = await page.script(f"return document.querySelector('{form} [name=\"many\"]').type")
        assert kind == "number"
        await page.type(f'{form} input[name="many"]', "49999")
        await page.click(f'{form} fieldset[data-path="blanks"] > button.add')
        assert await sent_by(page, form) == [{"many": 49999, "blanks": [None]}]


async def sent_by(page: Page, form: str) -> list[Any]:
    """Send a forged hook's form: the payloads it sent, once the server has answered (the
    forged hook is no hook the server resumes, so it answers HOOK_NOT_FOUND)."""
    await page.script(
        "window.sentBodies = []; const send = window.fetch;"
        "window.fetch = (url, init) => { window.sentBodies.push(init && init.body);"
        " return send(url, init); };"
    )
    await page.click(f"{form} > button")
    await page.text(f"{form} .said", "HOOK_NOT_FOUND")  # the server answered: it was sent
    sent = await page.script("return window.sentBodies.filter((b) => b)")
    return [json.loads(body)["payload"] for body in sent]


def _nested_maps(levels: int) -> dict[str, Any]:
    element: dict[str, Any] = {"kinds": ["integer"]}
    for _ in range(levels):
        element = {"map": element}
    return element


MAPPING_FORGED_SHAPE = {
    "required": [],
    "closed": "yes",
    "fields": {"bad": ["object"], "deep": ["object"], "wide": ["array"], "ok": ["object"]},
    "maps": {
        "bad": {"map": 5, "or": [1]},
        "deep": _nested_maps(400),
        "ok": {"map": {"kinds": ["integer"]}, "or": {"shape": None}},
    },
    "lists": {"wide": [{"kinds": ["integer"]}] * 1_000},
}
"""Issue #37's parts as no writer makes them: a mapping whose values are a number, one nested
400 deep (a writer records 16 levels), a union of 1,000 kinds of list (a writer records three
at most), a model beside a mapping that is no shape, and a ``closed`` that is not ``true``."""


async def test_a_forged_mapping_or_list_union_shape_leaves_a_form_that_works(
    console: Console, page: Page
) -> None:
    """Each malformed part is a JSON text area (the nested mapping past the form's 32 levels
    too, so no page of 400 fieldsets is built), and a well-formed mapping beside them is its
    key/value rows."""
    async with console.engine.worker([plain]):
        form = await _forged_form(console, page, "map-forged", MAPPING_FORGED_SHAPE)
        await page.click(f'{form} fieldset[data-path="ok"] > button.add')
        shown = await page.script(
            f"return [...document.querySelectorAll('{form} textarea')].map((t) => t.name)"
        )
        assert shown == ["bad", "deep", "wide"]
        said = await page.script("return document.getElementById('message').textContent")
        assert said == ""
