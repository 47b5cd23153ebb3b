"""An application that fails to import names the line to fix: the user's, not the library's
(a decorator refusing its options raises inside wayline)."""

from __future__ import annotations

from pathlib import Path

import pytest

from wayline.cli.loading import UsageError, import_app

CASES = {
    "both_retries": (
        "import wayline\n\n\n@wayline.step(retry=wayline.RetryPolicy(), max_retries=2)\n"
        "async def s() -> None: ...\n",
        4,
        "retry= or max_retries=",
    ),
    "sync_workflow": (
        "import wayline\n\n\n@wayline.workflow\ndef w() -> None: ...\n",
        4,
        "needs an async def",
    ),
    "own_error": ("x = 1\nraise RuntimeError('boom')\n", 2, "boom"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_an_import_failure_names_the_users_line(tmp_path: Path, case: str) -> None:
    text, line, said = CASES[case]
    app = tmp_path / f"{case}_app.py"
    app.write_text(text)
    with pytest.raises(UsageError) as info:
        import_app(str(app))
    message = str(info.value)
    assert said in message
    assert f"({app}:{line})" in message, message


@pytest.mark.parametrize("target", ["file", "module"])
def test_an_app_given_as_module_colon_workflow_says_to_drop_the_workflow(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, target: str
) -> None:
    """``wayline run`` takes ``MODULE_OR_FILE:WORKFLOW``; ``--app`` (worker, recover) takes the
    module alone. The form ``run`` accepted says so instead of "no module named 'x.py:w'".
    Each case has a module and a workflow of its own: both cases run in one process, and
    the ``[module]`` case's module, imported first, made the ``[file]`` case's file (of the
    same name, in another folder) a second, different workflow named ``w``, refused."""
    from wayline.cli.commands import import_apps

    stem, workflow = f"colon_{target}_app", f"colon_{target}_w"
    app = tmp_path / f"{stem}.py"
    app.write_text(f"import wayline\n\n\n@wayline.workflow\nasync def {workflow}() -> None: ...\n")
    monkeypatch.chdir(tmp_path)
    module = f"{stem}.py" if target == "file" else stem
    with pytest.raises(UsageError) as info:
        import_apps([f"{module}:{workflow}"])
    message = str(info.value)
    assert "not MODULE:WORKFLOW" in message and message.endswith(f"--app {module}"), message
    assert [d.name for d in import_apps([module])] == [workflow]


def test_a_directory_or_a_file_without_py_says_what_to_give(tmp_path: Path) -> None:
    """``--app examples/`` is a directory, not a missing file; ``examples/orders`` is one
    ``.py`` short of a file that exists."""
    folder = tmp_path / "app"
    folder.mkdir()
    (folder / "flows.py").write_text("x = 1\n")
    with pytest.raises(UsageError, match="a directory") as info:
        import_app(f"{folder}/")
    assert "no such file" not in str(info.value)
    with pytest.raises(UsageError, match="no such file") as info:
        import_app(str(folder / "flows"))
    assert str(info.value).endswith(f"(did you mean {str(folder / 'flows.py')!r}?)"), info.value
    with pytest.raises(UsageError) as info:
        import_app(str(folder / "other"))
    assert str(info.value).endswith("no such file"), info.value
