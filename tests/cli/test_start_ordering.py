"""``wayline start --priority N --fairness-key K --fairness-weight W`` records the run's
ordering as ``StartOptions`` does (docs/sdk.md, "Priority and fairness"); a value out of its
bounds is refused naming them, and nothing is started. On both worlds."""

from __future__ import annotations

import json

import pytest

from tests.cli.conftest import Run


def test_start_records_the_priority_and_fairness_given(run: Run) -> None:
    code, out, err = run(
        "start",
        "app.py",
        "--input",
        '"ada"',
        "--priority",
        "2",
        "--fairness-key",
        "acme",
        "--fairness-weight",
        "3",
    )
    assert code == 0, err
    run_id = out.strip()
    code, out, err = run("runs", "show", run_id, "--json")
    assert code == 0, err
    shown = json.loads(out)
    assert (shown["priority"], shown["fairnessKey"], shown["fairnessWeight"]) == (2, "acme", 3)


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["--priority", "10"], "priority is 0 (served first) to 9, not 10"),
        (["--priority", "-1"], "priority is 0 (served first) to 9, not -1"),
        (["--priority", "high"], "priority is an integer, not 'high'"),
        (["--fairness-key", ""], "fairness_key is a non-empty string"),
        (["--fairness-key", "k" * 257], "fairness_key has at most 256 characters, not 257"),
        (["--fairness-key", "a", "--fairness-weight", "0"], "fairness_weight is 1 to 100, not 0"),
        (["--fairness-key", "a", "--fairness-weight", "101"], "fairness_weight is 1 to 100"),
        (["--fairness-weight", "2"], "--fairness-weight weighs a --fairness-key"),
    ],
)
def test_a_bad_ordering_is_refused_naming_its_bounds_and_starts_nothing(
    run: Run, argv: list[str], said: str
) -> None:
    code, out, err = run("start", "app.py", "--input", '"grace"')  # the world exists
    assert code == 0, err
    first = out.strip()
    code, out, err = run("start", "app.py", "--input", '"ada"', *argv)
    assert code != 0 and said in err, (code, out, err)
    code, out, err = run("runs", "list", "--json")
    assert code == 0, err
    assert [r["runId"] for r in json.loads(out)] == [first]
