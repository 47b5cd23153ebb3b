"""``wayline start --attr``, ``wayline runs list --where/--since/--status/--workflow`` and the
attributes ``runs show`` prints, on SQLite and on NATS, in-process (no worker: ``runs
terminate`` ends a run, so a status can be asked for)."""

from __future__ import annotations

import json

import pytest

from tests.cli.conftest import Run
from wayline._core.ids import is_run_id


def _start(run: Run, *attrs: str) -> str:
    argv = ["start", "app.py", "--input", '"x"']
    for attr in attrs:
        argv += ["--attr", attr]
    code, out, err = run(*argv)
    assert code == 0 and is_run_id(out.strip()), err
    return out.strip()


def _listed(run: Run, *argv: str) -> set[str]:
    code, out, err = run("runs", "list", "--json", *argv)
    assert code == 0, err
    return {r["runId"] for r in json.loads(out)}


def test_attributes_given_at_start_are_shown_and_searched(run: Run) -> None:
    acme = _start(
        run,
        "tenant=acme",
        "amount=150",
        "vip=true",
        "due=2026-12-01T09:30:00+00:00",
        "tags=[eu,new]",
        'code="007"',
    )
    globex = _start(run, "tenant=globex", "amount=99.5")
    code, out, _ = run("runs", "show", acme)
    assert code == 0
    shown = [line for line in out.splitlines() if line.startswith("attribute ")]
    assert shown == [
        "attribute amount=150",
        "attribute code=007",
        "attribute due=2026-12-01T09:30:00+00:00",
        "attribute tags=eu,new",
        "attribute tenant=acme",
        "attribute vip=true",
    ]
    code, out, _ = run("runs", "show", acme, "--json")
    assert json.loads(out)["searchAttributes"]["amount"] == 150
    assert _listed(run, "--where", "tenant=acme") == {acme}
    assert _listed(run, "--where", "amount>100") == {acme}
    assert _listed(run, "--where", "amount<=99.5") == {globex}
    assert _listed(run, "--where", "tenant!=acme") == {globex}
    assert _listed(run, "--where", "tags=new", "--where", "vip=true") == {acme}
    assert _listed(run, "--where", 'code="007"') == {acme}
    assert _listed(run, "--where", "due<2026-12-02") == {acme}


def test_where_with_status_since_and_workflow(run: Run) -> None:
    failed, live = _start(run, "tenant=acme", "amount=500"), _start(run, "tenant=acme")
    assert run("runs", "terminate", failed)[0] == 0
    assert _listed(run, "--where", "tenant=acme", "--status", "cancelled") == {failed}
    assert _listed(run, "--where", "tenant=acme", "--status", "pending") == {live}
    assert _listed(run, "--where", "tenant=acme", "--since", "1h") == {failed, live}
    assert _listed(run, "--where", "tenant=acme", "--workflow", "nope") == set()
    code, out, _ = run(
        "runs", "list", "--where", "tenant=acme", "--where", "amount>100", "--status", "failed"
    )
    assert (code, out.strip()) == (
        0,
        "no runs with status failed where tenant=acme and amount>100",
    )
    code, out, _ = run("runs", "list", "--where", "tenant=acme", "--since", "1h")
    assert code == 0 and failed in out and live in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["runs", "list", "--where", "amount>>5"], "the value starts with '>'"),
        (["runs", "list", "--where", "tenant"], "is not 'key OP value'"),
        (["runs", "list", "--where", "vip<true"], "compares with = and != only"),
        (["runs", "list", "--since", "soon"], "not a duration"),
        (["start", "app.py", "--input", '"x"', "--attr", "tenant"], "is not key=value"),
        (["start", "app.py", "--input", '"x"', "--attr", "9x=1"], "is not allowed"),
        (
            ["start", "app.py", "--input", '"x"', "--attr", f"long={'x' * 300}"],
            "at most 256 characters",
        ),
    ],
)
def test_bad_expressions_and_attributes_exit_2_and_start_nothing(
    run: Run, argv: list[str], message: str
) -> None:
    before = _start(run, "tenant=acme")  # the world exists: a refusal is not "no world"
    code, _, err = run(*argv)
    assert code == 2 and message in err, err
    assert _listed(run) == {before}
