"""``python -m wayline_operator --help`` names both ways to call it (run, and write the CRDs)."""

from __future__ import annotations

import pytest

from wayline_operator.__main__ import main


def test_the_help_names_the_crds_command(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main(["--help"])
    assert done.value.code == 0
    out = capsys.readouterr().out
    assert "--peering" in out and "python -m wayline_operator crds [DIR]" in out
