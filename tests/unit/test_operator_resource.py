"""The WorkflowRun resource without a cluster: the checked-in CRD is the generated one, bad
specs are refused with messages that name the field, and the status mirrors the run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from wayline._core.events import Event, EventType, RunStatus
from wayline.world import RunInfo
from wayline_operator import crd_manifest
from wayline_operator.reconcile import InvalidSpec, parse_spec, run_id_for
from wayline_operator.resource import as_json, crds
from wayline_operator.status import invalid_status, run_status

CRDS = Path(__file__).resolve().parents[2] / "crds"


def test_the_checked_in_crds_are_the_generated_ones() -> None:
    generated = crds()
    assert sorted(p.name for p in CRDS.iterdir()) == sorted(generated)
    for name, manifest in generated.items():
        assert (CRDS / name).read_text() == as_json(manifest), (
            "regenerate with: python -m wayline_operator crds"
        )
    spec = crd_manifest()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]
    props = spec["spec"]["properties"]
    assert spec["spec"]["required"] == ["workflow"]
    assert props["input"] == {
        "description": props["input"]["description"],
        "x-kubernetes-preserve-unknown-fields": True,
    }
    assert props["compensation"]["properties"]["resumes"]["minimum"] == 0


def test_spec_input_is_the_positional_arguments_or_the_single_argument() -> None:
    assert parse_spec({"workflow": "w", "input": [1, 2]}).args() == [1, 2]
    assert parse_spec({"workflow": "w", "input": {"id": 7}}).args() == [{"id": 7}]
    assert parse_spec({"workflow": "w"}).args() == []


@pytest.mark.parametrize(
    ("spec", "names"),
    [
        ({}, "spec.workflow"),
        ({"workflow": ""}, "spec.workflow"),
        ({"workflow": "w", "cancle": True}, "spec.cancle"),
        ({"workflow": "w", "compensation": {"resumes": -1}}, "spec.compensation.resumes"),
    ],
)
def test_a_bad_spec_names_its_field(spec: dict[str, object], names: str) -> None:
    with pytest.raises(InvalidSpec, match=names.replace(".", r"\.")):
        parse_spec(spec)


def test_the_run_id_is_the_resource_uid() -> None:
    assert run_id_for("6F1C2B0A-1D2E-4F3A-9B8C-7D6E5F4A3B2C") == (
        "wf_6f1c2b0a1d2e4f3a9b8c7d6e5f4a3b2c"
    )


def _ev(seq: int, t: EventType, cid: str | None = None, **data: object) -> Event:
    return Event("wf_x", seq, t, cid, data, 1000.0 + seq)


def test_status_mirrors_phase_steps_output_and_condition() -> None:
    events = [
        _ev(1, EventType.RUN_CREATED, workflow="w"),
        _ev(2, EventType.RUN_STARTED),
        _ev(3, EventType.STEP_CREATED, "s1"),
        _ev(4, EventType.STEP_COMPLETED, "s1"),
        _ev(5, EventType.STEP_CREATED, "s2"),
        _ev(6, EventType.RUN_COMPLETED, output=3),
    ]
    info = RunInfo(
        "wf_x",
        "w",
        RunStatus.COMPLETED,
        output=3,
        created_at=1001.0,
        started_at=1002.0,
        ended_at=1006.0,
        updated_at=1006.0,
        last_seq=6,
    )
    status = run_status(info, events)
    assert status["phase"] == "completed" and status["output"] == 3
    assert status["steps"] == {"created": 2, "completed": 1, "failed": 0}
    assert status["endedAt"] == "1970-01-01T00:16:46Z"
    [cond] = status["conditions"]
    assert (cond["type"], cond["status"], cond["reason"]) == ("Succeeded", "True", "Succeeded")
    json.dumps(status)  # a status patch is JSON


def test_status_of_a_stuck_unwind_says_what_to_do() -> None:
    info = RunInfo("wf_x", "w", RunStatus.COMPENSATION_STUCK, error={"message": "boom"})
    [cond] = run_status(info, [])["conditions"]
    assert (cond["status"], cond["reason"]) == ("Unknown", "CompensationStuck")
    assert "spec.compensation.resumes" in cond["message"]
    failed = RunInfo("wf_x", "w", RunStatus.FAILED, error={"code": "X", "message": "bad"})
    status = run_status(failed, [])
    assert status["error"] == {"code": "X", "message": "bad"} and status["output"] is None
    assert status["conditions"][0]["status"] == "False"
    assert invalid_status("spec.workflow: missing")["phase"] == "invalid"
