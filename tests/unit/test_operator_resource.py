"""The WorkflowRun resource without a cluster: the checked-in CRD is the generated one, bad
specs are refused with messages that name the field, and the status mirrors the run."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from wayline._core.events import Event, EventType, RunStatus
from wayline.world import RunInfo
from wayline_operator import crd_manifest
from wayline_operator.notices import Budget, Notice, notices
from wayline_operator.reconcile import InvalidSpec, parse_spec, run_id_for
from wayline_operator.resource import as_json, crds
from wayline_operator.status import invalid_status, run_status, stamp
from wayline_operator.ttl import expired

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
    assert "an object, string, number or boolean" in props["input"]["description"]
    assert props["ttlSecondsAfterFinished"]["minimum"] == 0
    status = spec["status"]
    assert status["x-kubernetes-preserve-unknown-fields"] is True  # kopf writes beside it
    for name in ("phase", "waitingFor", "conditions", "steps", "progress", "message"):
        assert status["properties"][name]["description"], name
    hook = status["properties"]["waitingFor"]["items"]["properties"]
    assert {"token", "timeoutAt", "until", "runId", "kind"} <= set(hook)


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


def _ev(seq: int, t: EventType, cid: str | None = None, **data: object) -> Event:
    return Event("wf_x", seq, t, cid, data, 1000.0 + seq)


def _info(status: RunStatus, **kw: object) -> RunInfo:
    return RunInfo("wf_x", "w", status, **kw)  # type: ignore[arg-type]


def _cond(status: dict[str, object], kind: str) -> dict[str, object]:
    conds = status["conditions"]
    assert isinstance(conds, list)
    found: dict[str, object] = next(c for c in conds if c["type"] == kind)
    return found


def test_status_mirrors_phase_steps_output_and_conditions() -> None:
    events = [
        _ev(1, EventType.RUN_CREATED, workflow="w"),
        _ev(2, EventType.RUN_STARTED),
        _ev(3, EventType.STEP_CREATED, "s1", stepName="a"),
        _ev(4, EventType.STEP_COMPLETED, "s1"),
        _ev(5, EventType.STEP_CREATED, "s2", stepName="b"),
        _ev(6, EventType.RUN_COMPLETED, output=3),
    ]
    info = _info(
        RunStatus.COMPLETED,
        output=3,
        created_at=1001.0,
        started_at=1002.0,
        ended_at=1066.0,
        updated_at=1066.0,
        last_seq=6,
    )
    status = run_status(info, events, now=2000.0, generation=3)
    assert status["phase"] == "completed" and status["output"] == 3
    assert status["steps"] == {"created": 2, "completed": 1, "failed": 0, "compensations": 0}
    assert status["progress"] == "1/2" and status["duration"] == "1m4s"
    assert status["endedAt"] == "1970-01-01T00:17:46Z"
    assert status["waitingFor"] == [] and status["observedGeneration"] == 3
    succeeded = _cond(status, "Succeeded")
    assert (succeeded["status"], succeeded["reason"]) == ("True", "Succeeded")
    assert succeeded["observedGeneration"] == 3
    assert _cond(status, "Progressing")["status"] == "False"
    json.dumps(status)  # a status patch is JSON
    live = _info(RunStatus.RUNNING, created_at=1001.0, started_at=1002.0, last_seq=5)
    # a live run has no duration (it would freeze between writes; kubectl ages startedAt)
    assert run_status(live, events[:5], now=2000.0)["duration"] == ""


def test_waiting_for_names_hooks_with_tokens_sleeps_children_and_steps() -> None:
    events = [
        _ev(1, EventType.RUN_CREATED, workflow="w"),
        _ev(2, EventType.RUN_STARTED),
        _ev(3, EventType.HOOK_CREATED, "h1", token="approve-7"),
        _ev(4, EventType.WAIT_CREATED, "h1.timeout", resumeAt=5000.0),
        _ev(5, EventType.WAIT_CREATED, "w1", resumeAt=6000.0),
        _ev(6, EventType.CHILD_CREATED, "c1", childRunId="wf_kid", workflow="kid"),
        _ev(7, EventType.STEP_CREATED, "s1", stepName="charge"),
        _ev(8, EventType.STEP_STARTED, "s1", attempt=2),
        _ev(9, EventType.STEP_CREATED, "s2", stepName="done"),
        _ev(10, EventType.STEP_COMPLETED, "s2"),
    ]
    status = run_status(_info(RunStatus.RUNNING, last_seq=10), events, now=1010.0)
    kinds = [
        (w["kind"], w.get("token") or w.get("until") or w.get("runId") or w.get("name"))
        for w in status["waitingFor"]
    ]
    assert kinds == [
        ("hook", "approve-7"),
        ("child", "wf_kid"),
        ("sleep", "1970-01-01T01:40:00Z"),
        ("step", "charge"),
    ]
    assert status["waitingFor"][0]["timeoutAt"] == "1970-01-01T01:23:20Z"
    assert status["waitingFor"][3]["attempt"] == 2
    assert status["waitingForSummary"] == "hook approve-7 +3"
    assert _cond(status, "Blocked")["status"] == "False"  # a step and a sleep move it on
    only_hook = events[:4]
    waiting = run_status(_info(RunStatus.RUNNING, last_seq=4), only_hook, now=1010.0)
    assert (_cond(waiting, "Blocked")["status"], _cond(waiting, "Blocked")["reason"]) == (
        "True",
        "WaitingForHook",
    )
    assert "approve-7" in waiting["message"]
    answered = [*only_hook, _ev(5, EventType.HOOK_RECEIVED, "h1", payload=1)]
    assert run_status(_info(RunStatus.RUNNING), answered, now=1010.0)["waitingFor"] == []


def test_a_stuck_unwind_waits_for_a_person_with_the_step_and_error() -> None:
    events = [
        _ev(1, EventType.RUN_CREATED, workflow="w"),
        _ev(2, EventType.RUN_COMPENSATION_STUCK, step="release", error={"message": "boom"}),
    ]
    status = run_status(_info(RunStatus.COMPENSATION_STUCK), events, now=1010.0)
    [person] = status["waitingFor"]
    assert person["kind"] == "person" and person["step"] == "release"
    assert person["error"] == "boom" and "spec.compensation.resumes" in person["message"]
    blocked = _cond(status, "Blocked")
    assert (blocked["status"], blocked["reason"]) == ("True", "CompensationStuck")
    failed = _info(RunStatus.FAILED, error={"code": "X", "message": "bad"})
    status = run_status(failed, [], now=1010.0)
    assert status["error"] == {"code": "X", "message": "bad"} and status["output"] is None
    assert _cond(status, "Succeeded")["status"] == "False"
    assert invalid_status("spec.workflow: missing", now=0)["phase"] == "invalid"


def test_a_run_no_live_worker_serves_waits_for_a_worker_at_once() -> None:
    info = _info(RunStatus.PENDING, created_at=1000.0)
    alive = {"workflow": "w", "identity": "abc", "revision": None, "liveUntil": 1040.0}
    served = run_status(info, [], now=1001.0, served=[alive])
    assert served["waitingFor"] == [] and _cond(served, "Blocked")["status"] == "False"
    for nobody in ([], [{**alive, "workflow": "other"}], [{**alive, "liveUntil": 1000.5}]):
        late = run_status(info, [], now=1001.0, served=nobody)
        [worker] = late["waitingFor"]
        assert worker["kind"] == "worker" and "'w'" in worker["message"]
        assert _cond(late, "Blocked")["reason"] == "WaitingForWorker"
        assert "waiting_for_worker" in late["message"]
    pinned = _info(RunStatus.RUNNING, attributes={"definition": {"identity": "def123456789x"}})
    [worker] = run_status(pinned, [], now=1001.0, served=[alive])["waitingFor"]
    assert worker["identity"] == "def123456789x" and "identity def123456789" in worker["message"]
    assert run_status(info, [], now=1001.0)["waitingFor"] == []  # registry not read: no claim


def test_a_worker_of_a_queue_does_not_serve_a_run_started_without_one() -> None:
    """A ``--queue`` worker consumes its queue's route only, never the workflow's: a run
    started without a queue waits for a worker beside it (and a queued run waits beside a
    worker without one)."""
    info = _info(RunStatus.PENDING, created_at=1000.0)
    plain = {"workflow": "w", "identity": "abc", "revision": None, "liveUntil": 1040.0}
    gold = {**plain, "queue": "gold"}
    [worker] = run_status(info, [], now=1001.0, served=[gold])["waitingFor"]
    assert worker["kind"] == "worker" and "'w'" in worker["message"]
    assert "queue" not in worker["message"]
    assert run_status(info, [], now=1001.0, served=[gold, plain])["waitingFor"] == []
    queued = _info(RunStatus.PENDING, created_at=1000.0, attributes={"queue": "gold"})
    assert run_status(queued, [], now=1001.0, served=[gold])["waitingFor"] == []
    [worker] = run_status(queued, [], now=1001.0, served=[plain])["waitingFor"]
    assert "on queue 'gold'" in worker["message"]


def test_a_run_waiting_for_a_concurrency_slot_says_so_not_for_a_worker() -> None:
    """The run's own limit (before it starts) and a step's: ``kind: concurrency``, never
    ``worker``, and not Blocked (it moves on by itself once a slot is free)."""
    own = _info(
        RunStatus.BLOCKED,
        created_at=1000.0,
        error={
            "code": "CONCURRENCY_LIMIT",
            "waitingFor": "concurrency",
            "limit": "w:ana",
            "message": "waiting for a concurrency slot of 'w:ana'",
        },
    )
    status = run_status(own, [], now=1030.0, served=[])
    assert status["waitingFor"] == [
        {
            "kind": "concurrency",
            "limit": "w:ana",
            "message": "waiting for a concurrency slot of 'w:ana'",
        }
    ]
    assert status["waitingForSummary"] == "concurrency (w:ana)"
    assert _cond(status, "Blocked")["status"] == "False"
    step = _info(
        RunStatus.BLOCKED,
        error={
            "code": "STEP_CONCURRENCY_LIMIT",
            "waitingFor": "concurrency",
            "limit": "step:render:*",
            "step": "render",
            "stepId": "s2",
            "message": "m",
        },
    )
    [wait] = run_status(step, [], now=1030.0)["waitingFor"]
    assert wait == {
        "kind": "concurrency",
        "limit": "step:render:*",
        "name": "render",
        "stepId": "s2",
        "message": "m",
    }


def test_a_run_waiting_for_a_rate_limits_token_says_until_when() -> None:
    """A step's rate limit (``wayline.RateLimit``): ``kind: rate_limit`` with the key and when
    the next token is due, never ``worker``, and not Blocked (it moves on by itself)."""
    info = _info(
        RunStatus.BLOCKED,
        created_at=1000.0,
        error={
            "code": "STEP_RATE_LIMIT",
            "waitingFor": "rate_limit",
            "limit": "step:notify:ana",
            "rate": "30/m",
            "until": "2026-12-06T19:40:00.000+00:00",
            "step": "notify",
            "stepId": "s1",
            "message": "m",
        },
    )
    status = run_status(info, [], now=1030.0, served=[])
    assert status["waitingFor"] == [
        {
            "kind": "rate_limit",
            "limit": "step:notify:ana",
            "until": "2026-12-06T19:40:00.000+00:00",
            "name": "notify",
            "stepId": "s1",
            "message": "m",
        }
    ]
    assert status["waitingForSummary"] == (
        "rate limit (notify) until 2026-12-06T19:40:00.000+00:00"
    )
    assert _cond(status, "Blocked")["status"] == "False"


def test_a_debounced_run_not_begun_says_until_when() -> None:
    """``wayline.Debounce``: ``kind: debounce`` with the key and when the run begins (one period
    after its last start), not Blocked; once it began, nothing of it."""
    attributes = {"debounce": {"key": "w:doc", "period": 30.0}}
    info = _info(RunStatus.PENDING, created_at=1000.0, attributes=attributes)
    events = [
        _ev(1, EventType.RUN_CREATED, workflow="w", debounce=attributes["debounce"]),
        _ev(2, EventType.RUN_DEBOUNCED, input={"args": [2]}),
    ]
    status = run_status(info, events, now=1001.0, served=[])
    [wait] = status["waitingFor"]
    assert wait["kind"] == "debounce" and wait["limit"] == "w:doc"
    assert wait["until"] == stamp(events[1].created_at + 30.0)
    assert status["waitingForSummary"] == f"debounce (w:doc) until {wait['until']}"
    assert _cond(status, "Blocked")["status"] == "False"
    began = _info(RunStatus.RUNNING, created_at=1000.0, attributes=attributes)
    assert run_status(began, events, now=1001.0)["waitingFor"] == []


def test_last_transition_time_moves_only_when_the_status_changes() -> None:
    info = _info(RunStatus.RUNNING)
    first = run_status(info, [], now=1000.0, generation=1)
    again = run_status(info, [], now=2000.0, generation=2, previous=first["conditions"])
    for kind in ("Succeeded", "Progressing", "Blocked"):
        assert _cond(again, kind)["lastTransitionTime"] == _cond(first, kind)["lastTransitionTime"]
        assert _cond(again, kind)["observedGeneration"] == 2
    done = _info(RunStatus.COMPLETED, ended_at=3000.0)
    ended = run_status(done, [], now=3000.0, previous=again["conditions"])
    assert _cond(ended, "Succeeded")["lastTransitionTime"] == "1970-01-01T00:50:00Z"
    assert _cond(ended, "Blocked")["lastTransitionTime"] == "1970-01-01T00:16:40Z"  # still False


def test_notices_say_what_the_log_says_after_a_sequence() -> None:
    events = [
        _ev(1, EventType.RUN_CREATED, workflow="w"),
        _ev(2, EventType.RUN_STARTED),
        _ev(3, EventType.STEP_CREATED, "s1", stepName="charge"),
        _ev(4, EventType.STEP_STARTED, "s1", attempt=1, ownerMessageId="m1"),
        _ev(5, EventType.STEP_RETRYING, "s1", error={"message": "declined"}, retryAfter=1007.5),
        _ev(6, EventType.STEP_STARTED, "s1", attempt=2, ownerMessageId="m2"),
        _ev(7, EventType.HOOK_CREATED, "h1", token="tok-9"),
        _ev(8, EventType.RUN_FAILED, error={"code": "USER_ERROR", "message": "no"}),
    ]
    got = [(n.reason, n.message) for n in notices(events)]
    assert [r for r, _ in got] == [
        "RunStarted",
        "StepRetrying",
        "OwnedRecovery",
        "WaitingForHook",
        "RunFailed",
    ]
    assert "declined" in got[1][1] and "charge" in got[1][1]
    # retryAfter is the instant the attempt is due: the Event says the delay from its own time.
    assert got[1][1].endswith("; next attempt in 2.5s"), got[1][1]
    assert "tok-9" in got[3][1] and got[4][1] == "[USER_ERROR] no"
    assert [n.reason for n in notices(events, after_seq=6)] == ["WaitingForHook", "RunFailed"]


def test_the_budget_limits_notices_per_resource_and_says_what_it_dropped() -> None:
    budget = Budget(burst=3, every=10.0)
    batch = [Notice("Normal", f"R{i}", "m") for i in range(5)]
    assert len(budget.admit("a", batch, now=0.0)) == 3
    assert budget.admit("a", batch[:1], now=1.0) == []
    assert len(budget.admit("b", batch, now=1.0)) == 3  # another resource has its own
    later = budget.admit("a", batch[:1], now=11.0)
    assert len(later) == 1 and "3 earlier events not posted" in later[0].message


def test_ttl_counts_from_the_runs_end() -> None:
    status = {"endedAt": "1970-01-01T00:16:40Z"}  # 1000
    assert not expired(None, status, 5000.0)
    assert not expired(30, status, 1029.0)
    assert expired(30, status, 1030.0)
    assert not expired(30, {}, 5000.0)


def test_a_run_that_started_and_ended_in_one_batch_gets_one_event_with_its_start() -> None:
    events = [
        _ev(1, EventType.RUN_CREATED, workflow="w"),
        _ev(2, EventType.RUN_STARTED),
        _ev(3, EventType.STEP_CREATED, "s1", stepName="charge"),
        _ev(4, EventType.STEP_STARTED, "s1", attempt=1, ownerMessageId="m1"),
        _ev(5, EventType.RUN_COMPLETED),
    ]
    [only] = notices(events)
    assert only.reason == "RunSucceeded" and "started 1970-01-01T00:" in only.message
    # seen live first: the start was posted then, the end alone now
    assert [n.reason for n in notices(events[:2])] == ["RunStarted"]
    assert [n.reason for n in notices(events, after_seq=2)] == ["RunSucceeded"]
    failed = [*events[:4], _ev(5, EventType.RUN_FAILED, error={"code": "X", "message": "no"})]
    [end] = notices(failed)
    assert end.reason == "RunFailed" and end.message.startswith("[X] no (started ")


def test_the_docs_say_helm_upgrade_does_not_install_the_input_policy() -> None:
    """Helm installs ``crds/`` at ``helm install`` only, never at ``helm upgrade``: an
    installation upgraded to the chart that brought the input policy has no policy (and its
    edited inputs are accepted and ignored) until the policy is applied by hand."""
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "docs" / "operator.md").read_text()
    assert "helm upgrade" in text
    assert "kubectl apply -f crds/workflowruns-input-policy.json" in text


def test_the_docs_and_the_crd_name_every_phase_and_no_other() -> None:
    """Every phase the operator writes (the run's statuses, ``corrupt`` included, and
    ``invalid``) is named where phases are listed, and nothing else is: ``blocked`` is a
    run's status (a concurrency slot, a definition, a divergence), not a missing worker."""
    phases = {str(s) for s in RunStatus} | {"invalid"}
    text = (Path(__file__).resolve().parents[2] / "docs" / "operator.md").read_text()
    listed = text.split("**Phases keep the run's own words** (", 1)[1].split(")", 1)[0]
    assert set(re.findall(r"`(\w+)`", listed)) == phases
    spec = crd_manifest()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    described = spec["properties"]["status"]["properties"]["phase"]["description"]
    named = {p for p in re.findall(r"[a-z_]+", described) if p in phases}
    assert named == phases and "no matching worker" not in described


def test_a_continued_run_is_neither_a_success_nor_a_failure() -> None:
    """Between a run's continue_as_new and its next run's mirror, the resource says where the
    run went on (a chain's runs are its business id's generations, which it then follows)."""
    from wayline_operator.status import conditions

    info = _info(RunStatus.CONTINUED_AS_NEW, output={"nextRunId": "wf_next"})
    [succeeded] = [c for c in conditions(info, []) if c["type"] == "Succeeded"]
    assert (succeeded["status"], succeeded["reason"]) == ("Unknown", "ContinuedAsNew")
    assert "wf_next" in succeeded["message"]
