"""The console never imports a module because a log names it, on every world: a typed hook's
recorded type (``module:Qualname``) is written by whoever wrote the log, and importing that
module would run its code in the console. A resume through the console looks for the class
only in modules already imported; otherwise the payload is checked against the recorded shape
alone (a wrong one is a typed 422, a right one resumes the run)."""

from __future__ import annotations

from pathlib import Path

import pydantic
import pytest

import wayline
from tests.console.conftest import AUTH, Console
from tests.console.test_hook_forms import _received

MODULE = "hook_type_imports_marker"
"""A module that the recorded type names: importing it writes a marker file."""


class Parcel(pydantic.BaseModel):
    weight: int
    to: str


@wayline.workflow(name="hook_type_imports.ship")
async def ship(order: str) -> str:
    answer = await wayline.create_hook(f"hook_type_imports:{order}", type=Parcel)
    return f"{answer.weight} to {answer.to}"


async def test_a_resume_through_the_console_never_imports_the_recorded_types_module(
    console: Console, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    marker = tmp_path / "imported"
    (tmp_path / f"{MODULE}.py").write_text(
        "import pathlib\n"
        f"pathlib.Path({str(marker)!r}).write_text('the console imported me')\n"
        "class Parcel:\n"
        "    pass\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    # the hook records its type as MODULE:Parcel, a module no one has imported
    monkeypatch.setattr(Parcel, "__module__", MODULE)
    monkeypatch.delitem(__import__("sys").modules, MODULE, raising=False)
    client = console.engine.client
    async with console.engine.worker([ship]):
        run = await client.start(ship, "p1")
        token = "hook_type_imports:p1"
        await client.wait_for_hook(token, timeout=10)
        url = f"/api/hooks/{token}/resume"
        (hook,) = (await console.http.get(f"/api/hooks?run={run.run_id}")).json()["hooks"]
        assert hook["type"] == f"{MODULE}:Parcel"
        wrong = await console.http.post(url, json={"payload": {"weight": "heavy"}}, headers=AUTH)
        assert wrong.status_code == 422, wrong.text  # refused by the recorded shape alone
        message = wrong.json()["error"]["message"]
        assert "weight: expected integer" in message and "to: Field required" in message
        assert await _received(console, run.run_id) == 0
        good = await console.http.post(
            url, json={"payload": {"weight": 3, "to": "Lisbon"}}, headers=AUTH
        )
        assert good.status_code == 200, good.text
        assert await run.result(timeout=10) == "3 to Lisbon"
    assert not marker.exists(), "the console imported the module a hook's recorded type names"


class BaseSettings(pydantic.BaseModel):
    """Recorded as ``pydantic:BaseSettings``: a name pydantic's module ``__getattr__`` answers
    with an ImportError (the class moved to another package)."""

    weight: int
    to: str


@wayline.workflow(name="hook_type_imports.settle")
async def settle(order: str) -> str:
    answer = await wayline.create_hook(f"hook_type_imports:{order}", type=BaseSettings)
    return f"{answer.weight} to {answer.to}"


async def test_a_recorded_type_whose_lookup_runs_a_modules_code_is_checked_by_its_shape(
    console: Console, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A recorded type may name an attribute that an already imported module makes on demand
    (a module's ``__getattr__``: pydantic's raises an ImportError for a name it moved away).
    Looking it up ran that module's code, and its error was the resume's 500; now only what the
    module holds is looked at, and the payload is checked by the recorded shape."""
    monkeypatch.setattr(BaseSettings, "__module__", "pydantic")
    client = console.engine.client
    async with console.engine.worker([settle]):
        run = await client.start(settle, "moved")
        token = "hook_type_imports:moved"
        await client.wait_for_hook(token, timeout=10)
        (hook,) = (await console.http.get(f"/api/hooks?run={run.run_id}")).json()["hooks"]
        assert hook["type"] == "pydantic:BaseSettings"
        url = f"/api/hooks/{token}/resume"
        wrong = await console.http.post(url, json={"payload": {"weight": "heavy"}}, headers=AUTH)
        assert wrong.status_code == 422, wrong.text
        assert "weight: expected integer" in wrong.json()["error"]["message"]
        good = await console.http.post(
            url, json={"payload": {"weight": 2, "to": "Oslo"}}, headers=AUTH
        )
        assert good.status_code == 200, good.text
        assert await run.result(timeout=10) == "2 to Oslo"
