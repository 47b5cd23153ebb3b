"""The README's first example is what a user copies first: it must pass ``mypy --strict`` as
it stands (only its payment provider, which the README leaves to the reader, is stubbed)."""

from __future__ import annotations

import re
from pathlib import Path

from tests.typing.test_typing import ROOT, _mypy

STUB = '''
class _Payments:
    async def charge(self, order_id: str, cents: int, *, idempotency_key: str) -> str:
        return idempotency_key


payments = _Payments()
'''


def test_the_readme_example_passes_mypy_strict(tmp_path: Path) -> None:
    readme = (ROOT / "README.md").read_text()
    first = re.search(r"```python\n(.*?)```", readme, re.S)
    assert first is not None and "@wayline.workflow" in first[1]
    code = first[1].replace("import wayline\n", "import wayline\n" + STUB, 1)
    path = tmp_path / "readme_example.py"
    path.write_text(code)
    assert _mypy(path.resolve()) == {}
