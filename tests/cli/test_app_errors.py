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
