"""``python -m wayline.sim --jobs N``: the seeds cut into disjoint ranges that cover them all,
run in N processes with one summary, and every failing seed listed with how to replay it."""

from __future__ import annotations

import pytest

from wayline.sim import __main__ as cli
from wayline.sim import batches


def test_the_ranges_cover_every_seed_once_in_order() -> None:
    cut = batches.ranges(7, 1203, chunk=500)
    assert cut == [(7, 500), (507, 500), (1007, 203)]
    seeds = [s for first, n in cut for s in range(first, first + n)]
    assert seeds == list(range(7, 1210))
    assert batches.ranges(0, 0) == []


def test_every_failing_seed_is_listed_with_its_replay(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    class _Broken:
        def __init__(self, seed: int) -> None:
            self.ok = seed % 2 == 1
            self.violations = [] if self.ok else [f"made up for seed {seed}"]

    monkeypatch.setattr(batches, "run_seed", lambda seed: _Broken(seed))
    monkeypatch.setattr(batches, "CHUNK", 3)
    assert cli.main(["--seeds", "7", "--first", "3"]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[:3] == [
        f"seed {s} FAILED: made up for seed {s} (replay: make sim SEED={s})" for s in (4, 6, 8)
    ]
    assert out[3].startswith("7 seeds, 3 failed, ")


def test_seeds_run_in_two_processes_give_one_summary(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["--seeds", "2", "--first", "40", "--jobs", "2"]) == 0
    (line,) = capsys.readouterr().out.splitlines()
    assert line.startswith("2 seeds, 0 failed, ")
    assert line.endswith("s of wall time")
    assert "2 processes" in line


@pytest.mark.parametrize("argv", [["--jobs", "0"], ["--seeds", "-1"]])
def test_a_bad_count_is_refused_with_its_value(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        cli.main(argv)
    assert exited.value.code == 2
    assert argv[1] in capsys.readouterr().err
