"""What the console's typed-hook form tests share: a workflow that waits on a hook of a given
class, a run of it waiting with its form open on the page, sending the form (refused in the
browser, or resumed), and refusing wrong payloads through the API with or without the class."""

from __future__ import annotations

from typing import Any

import pydantic
import pytest

import wayline
from tests.console.browser import Page
from tests.console.conftest import AUTH, TOKEN, Console
from tests.console.test_hook_forms import _received
from tests.console.test_list_union_hook_forms import refused_each


def typed_hook_workflow(name: str, cls: type[pydantic.BaseModel]) -> Any:
    """A workflow named ``name`` that waits on a hook typed ``cls`` (its token ``name:<its
    argument>``) and returns the payload it received, as the class dumps it."""

    @wayline.workflow(name=name)
    async def answered(key: str) -> dict[str, Any]:
        answer = await wayline.create_hook(f"{name}:{key}", type=cls)
        dumped: dict[str, Any] = answer.model_dump(exclude_unset=True)
        return dumped

    return answered


async def _waiting(console: Console, workflow: Any, name: str) -> tuple[Any, str]:
    """A run of ``workflow`` started and waiting on its hook: its handle and the hook's token."""
    run = await console.engine.client.start(workflow, name)
    token = f"{workflow.name}:{name}"
    await console.engine.client.wait_for_hook(token, timeout=20)
    return run, token


async def _open(page: Page, token: str) -> str:
    await page.open("/hooks")
    await page.type("#token", TOKEN + "\t")
    return f'form[data-token="{token}"]'


async def _form(console: Console, page: Page, workflow: Any) -> tuple[Any, str]:
    """A run of ``workflow`` waiting on its hook, and its hook's form open on the page."""
    run, token = await _waiting(console, workflow, "browser")
    return run, await _open(page, token)


async def _refused_in_browser(
    console: Console, page: Page, form: str, run_id: str, said: str
) -> str:
    """Send the form: the browser refuses it (saying ``said``), and nothing is received."""
    await page.click(f"{form} > button")
    shown = await page.text(f"{form} .said", said)
    assert await _received(console, run_id) == 0
    return shown


async def _texts(page: Page, css: str) -> list[str]:
    """What each element ``css`` finds says, in the page's order."""
    found: list[str] = await page.script(
        f"return [...document.querySelectorAll('{css}')].map((element) => element.textContent)"
    )
    return found


async def _resumed(page: Page, form: str, run: Any) -> Any:
    """Send the form: the hook is resumed, and the run's result is returned."""
    await page.click(f"{form} > button")
    await page.text(f"{form} .said", "resumed")
    return await run.result(timeout=20)


Cases = list[tuple[Any, list[tuple[object, str]], Any]]
"""Each a workflow, payloads its hook refuses (with a word its 422 names), and one it takes."""


async def refused_then_answered(console: Console, cases: Cases, name: str) -> None:
    """For each case, a run waiting on its hook refuses each wrong payload through the API (a
    typed 422, nothing received) and then ends with exactly the good one."""
    for workflow, wrong, good in cases:
        async with console.engine.worker([workflow]):
            run, token = await _waiting(console, workflow, name)
            url = f"/api/hooks/{token}/resume"
            await refused_each(console, url, wrong)
            assert await _received(console, run.run_id) == 0
            resumed = await console.http.post(url, json={"payload": good}, headers=AUTH)
            assert resumed.status_code == 200, resumed.text
            assert await run.result(timeout=20) == good


async def refused_with_or_without_class(
    console: Console, monkeypatch: pytest.MonkeyPatch, with_class: bool, cases: Cases
) -> None:
    """:func:`refused_then_answered`, by a console that has the hooks' classes or, without
    ``with_class``, one that cannot import them (its recorded shape is what refuses)."""
    if not with_class:
        monkeypatch.setattr("wayline._sdk.hooks.find_type", lambda name, **_: None)
    await refused_then_answered(console, cases, f"api-{with_class}")
