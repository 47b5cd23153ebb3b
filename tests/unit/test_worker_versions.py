"""The WorkflowWorker planner without a cluster: every transition of a version (created,
scaled on its backlog, draining, deleted, retired) from hand-built observations."""

from __future__ import annotations

from typing import Any

from wayline_operator.deployments import (
    DRAINING_ENV,
    VERSION_ENV,
    deployment,
    draining_template,
    is_draining,
    template_hash,
)
from wayline_operator.worker_resource import WorkflowWorkerSpec
from wayline_operator.worker_versions import (
    CURRENT,
    DRAINING,
    RETIRED,
    Deployed,
    LiveRun,
    Plan,
    Seen,
    plan,
    version_of,
)

V1 = WorkflowWorkerSpec(image="app:1", apps=["shop.flows"], maxReplicas=5, backlogPerReplica=10)
V2 = V1.model_copy(update={"image": "app:2"})
NEW, OLD = version_of(V2), version_of(V1)


def _seen(**overrides: Any) -> Seen:
    values: dict[str, Any] = {
        "current": NEW,
        "deployed": {NEW: Deployed(1, 1)},
        "rows": {},
        "serving": {NEW: {"id2"}},
        "runs": [],
        "backlog": 0,
        "now": 1000.0,
        "last_scale": None,
    }
    values.update(overrides)
    return Seen(**values)


def _reasons(todo: Plan) -> list[str]:
    return [n.reason for n in todo.notices]


def _row(todo: Plan, version: str) -> dict[str, Any]:
    return next(r for r in todo.rows if r["name"] == version)


def test_a_version_is_image_apps_and_env_not_resources() -> None:
    assert version_of(V1) != version_of(V2)
    assert version_of(V1.model_copy(update={"env": {"A": "1"}})) != version_of(V1)
    assert version_of(V1.model_copy(update={"apps": ["other"]})) != version_of(V1)
    assert version_of(V1.model_copy(update={"resources": {"limits": {"cpu": "1"}}})) == OLD
    assert version_of(V1.model_copy(update={"maxReplicas": 9})) == OLD


def test_a_new_version_is_created_beside_the_old_one() -> None:
    todo = plan(V2, _seen(deployed={OLD: Deployed(3, 3)}, serving={OLD: {"id1"}}))
    assert todo.create == 1 and todo.scaled
    assert "VersionCreated" in _reasons(todo)
    # no live run pinned to it, but the new version's workers have not said what they serve:
    # the old one keeps its replicas until they do, and drains (takes no new run) at once
    assert todo.delete == [] and todo.scale == {}
    assert todo.drain == [OLD]
    assert _row(todo, NEW)["state"] == CURRENT
    seen = _seen(
        deployed={NEW: Deployed(1, 1), OLD: Deployed(3, 3)}, serving={OLD: {"id1"}, NEW: {"id2"}}
    )
    assert plan(V2, seen).delete == [OLD]


def test_an_old_version_with_pinned_runs_drains_down_to_one_replica_then_goes() -> None:
    runs = [LiveRun(f"r{i}", "id1") for i in range(15)] + [LiveRun("new", "id2")]
    seen = _seen(
        deployed={NEW: Deployed(1, 1), OLD: Deployed(4, 4)}, serving={OLD: {"id1"}, NEW: {"id2"}}
    )
    todo = plan(V2, _replace(seen, runs=runs))
    assert todo.scale == {OLD: 2}  # 15 pinned runs, 10 a replica
    assert _reasons(todo) == ["VersionDraining", "Scaled"]
    row = _row(todo, OLD)
    assert (row["state"], row["pinnedRuns"], row["replicas"]) == (DRAINING, 15, 2)
    # one run left: one replica, and no second VersionDraining
    rows = {OLD: row}
    todo = plan(
        V2,
        _replace(seen, runs=runs[:1], rows=rows, deployed={**seen.deployed, OLD: Deployed(2, 2)}),
    )
    assert todo.scale == {OLD: 1} and _reasons(todo) == ["Scaled"]
    # drained: its identities are remembered in its row though its pods are gone
    todo = plan(V2, _replace(seen, runs=[], rows=rows, serving={NEW: {"id2"}}))
    assert todo.delete == [OLD] and _reasons(todo) == ["VersionDeleted"]
    assert [r["name"] for r in todo.rows] == [NEW]


def test_an_old_version_scaled_to_zero_gets_a_replica_for_its_runs() -> None:
    seen = _seen(
        deployed={NEW: Deployed(1, 1), OLD: Deployed(0, 0)},
        rows={OLD: {"identities": ["id1"], "state": DRAINING}},
    )
    todo = plan(V2, _replace(seen, runs=[LiveRun("r", "id1")]))
    assert todo.scale == {OLD: 1}


def test_a_run_the_current_version_also_serves_pins_no_old_version() -> None:
    seen = _seen(
        deployed={NEW: Deployed(1, 1), OLD: Deployed(2, 2)},
        serving={NEW: {"id1", "id2"}, OLD: {"id1"}},
        runs=[LiveRun("r", "id1")],
    )
    assert plan(V2, seen).delete == [OLD]


def test_an_old_version_whose_identities_were_never_seen_is_kept() -> None:
    seen = _seen(deployed={NEW: Deployed(1, 1), OLD: Deployed(2, 0)})
    todo = plan(V2, seen)
    assert todo.delete == [] and todo.scale == {}
    assert _reasons(todo) == ["VersionDraining"] and "spec.retire" in todo.notices[0].message


def test_a_retired_version_is_deleted_and_its_runs_are_blocked_naming_it() -> None:
    spec = V2.model_copy(update={"retire": [OLD]})
    runs = [LiveRun("stuck", "id1"), LiveRun("fine", "id2")]
    seen = _seen(
        deployed={NEW: Deployed(1, 1), OLD: Deployed(2, 2)}, serving={OLD: {"id1"}}, runs=runs
    )
    todo = plan(spec, seen)
    assert todo.delete == [OLD] and todo.blocked == {OLD: ["stuck"]}
    [notice] = todo.notices
    assert (notice.type, notice.reason) == ("Warning", "VersionRetired") and OLD in notice.message
    row = _row(todo, OLD)
    assert (row["state"], row["blockedRuns"], row["replicas"]) == (RETIRED, ["stuck"], 0)
    # the next look: no Deployment to delete, no second Event, the row stays while blocked
    todo = plan(spec, _replace(seen, deployed={NEW: Deployed(1, 1)}, rows={OLD: row}))
    assert todo.delete == [] and todo.notices == [] and _row(todo, OLD)["state"] == RETIRED
    todo = plan(spec, _replace(seen, deployed={NEW: Deployed(1, 1)}, rows={OLD: row}, runs=[]))
    assert [r["name"] for r in todo.rows] == [NEW]


def test_the_current_version_cannot_be_retired() -> None:
    todo = plan(V2.model_copy(update={"retire": [NEW]}), _seen())
    assert todo.delete == [] and _row(todo, NEW)["state"] == CURRENT


def test_the_current_version_scales_up_at_once_and_down_after_the_cooldown() -> None:
    todo = plan(V2, _seen(backlog=35, last_scale=999.0))
    assert todo.scale == {NEW: 4} and todo.scaled and _reasons(todo) == ["Scaled"]
    assert plan(V2, _seen(backlog=500)).scale == {NEW: 5}  # maxReplicas
    busy = _seen(deployed={NEW: Deployed(5, 5)}, backlog=0, last_scale=990.0)
    assert plan(V2, busy).scale == {}  # within cooldownSeconds (60)
    assert plan(V2, _replace(busy, last_scale=900.0)).scale == {NEW: 1}  # minReplicas


def test_scale_to_zero_when_idle_and_back_to_one_on_the_first_message() -> None:
    spec = V2.model_copy(update={"scaleToZero": True, "minReplicas": 0, "cooldownSeconds": 0})
    assert plan(spec, _seen()).scale == {NEW: 0}
    assert plan(spec, _seen(deployed={NEW: Deployed(0, 0)}, backlog=1)).scale == {NEW: 1}
    # without scaleToZero, minReplicas 0 still keeps one pod
    assert plan(V2.model_copy(update={"minReplicas": 0}), _seen()).scale == {}


def test_the_deployment_carries_image_apps_env_and_version() -> None:
    body = {"metadata": {"name": "shop", "namespace": "ns", "uid": "u-1"}}
    template = {
        "spec": {
            "containers": [
                {
                    "name": "worker",
                    "args": ["--app=stale", "--processes=2"],
                    "env": [{"name": "A", "value": "old"}],
                }
            ]
        }
    }
    spec = V2.model_copy(update={"env": {"A": "new"}, "template": template})
    made = deployment(body, spec, NEW, 2)
    assert made["metadata"]["name"] == f"shop-{NEW}" and made["spec"]["replicas"] == 2
    assert made["metadata"]["ownerReferences"][0]["uid"] == "u-1"
    [container] = made["spec"]["template"]["spec"]["containers"]
    assert container["image"] == "app:2"
    assert container["args"] == ["--app=shop.flows", "--processes=2"]
    assert container["env"] == [{"name": "A", "value": "new"}, {"name": VERSION_ENV, "value": NEW}]
    labels = made["spec"]["template"]["metadata"]["labels"]
    assert made["spec"]["selector"]["matchLabels"].items() <= labels.items()
    assert template["spec"]["containers"][0]["args"][0] == "--app=stale"  # not changed in place


def test_every_old_version_kept_is_told_to_drain_once_and_the_current_one_never() -> None:
    seen = _seen(
        deployed={NEW: Deployed(1, 1), OLD: Deployed(2, 2)},
        serving={OLD: {"id1"}, NEW: {"id2"}},
        runs=[LiveRun("r", "id1")],
    )
    assert plan(V2, seen).drain == [OLD]
    drained = _replace(seen, deployed={NEW: Deployed(1, 1), OLD: Deployed(2, 2, draining=True)})
    assert plan(V2, drained).drain == []
    # a version deleted or retired is not patched on its way out
    assert plan(V2, _replace(seen, runs=[])).drain == []
    assert plan(V2.model_copy(update={"retire": [OLD]}), seen).drain == []
    # a rollback: the old version is current again and drains nothing; the new one drains
    back = _replace(
        seen, current=OLD, deployed={NEW: Deployed(1, 1), OLD: Deployed(2, 2, draining=True)}
    )
    assert plan(V1, _replace(back, runs=[LiveRun("r2", "id2")])).drain == [NEW]


def test_a_drained_template_differs_from_the_spec_so_a_rollback_writes_the_drain_off() -> None:
    body = {"metadata": {"name": "shop", "namespace": "ns", "uid": "u-1"}}
    made = deployment(body, V1, OLD, 1)
    assert not is_draining(made["spec"]["template"])
    drained = draining_template(made["spec"]["template"])
    assert is_draining(drained) and not is_draining(made["spec"]["template"])
    [container] = drained["spec"]["containers"]
    assert container["env"][-1] == {"name": DRAINING_ENV, "value": "1"}
    # the hash the operator writes with the drain is not the spec's: a rollback to this
    # version finds them different and writes the spec's template (no drain) back
    assert template_hash({"spec": {"template": drained}}) != template_hash(made)
    # the spec cannot drain the current version (it would leave every new run waiting)
    own = V1.model_copy(update={"env": {DRAINING_ENV: "1"}})
    assert not is_draining(deployment(body, own, version_of(own), 1)["spec"]["template"])


def _replace(seen: Seen, **changes: Any) -> Seen:
    from dataclasses import replace

    return replace(seen, **changes)


def test_a_step_under_way_keeps_its_version_from_scaling_below_its_holders() -> None:
    # A step longer than the cooldown leaves no ready backlog, only the message its worker
    # holds: the version keeps a replica for it, and goes to zero once it is settled.
    spec = V2.model_copy(update={"scaleToZero": True, "minReplicas": 0, "cooldownSeconds": 0})
    assert plan(spec, _seen(in_flight=1)).scale == {}
    assert plan(spec, _seen(deployed={NEW: Deployed(0, 0)}, in_flight=1)).scale == {NEW: 1}
    held = _seen(deployed={NEW: Deployed(5, 5)}, backlog=0, in_flight=30, last_scale=0.0)
    assert plan(V2, held).scale == {NEW: 3}  # ceil(30 / backlogPerReplica), not minReplicas
    assert plan(spec, _seen(in_flight=0)).scale == {NEW: 0}


def test_a_wave_of_sleeping_runs_due_soon_brings_a_version_up_before_it_falls_due() -> None:
    # Runs asleep have no ready message and no held one: scaled on those alone, a version at
    # zero would wake only when the first wake falls due. Their wakes due within the lead time
    # count as load, so the replicas are up when the wave arrives.
    spec = V2.model_copy(update={"scaleToZero": True, "minReplicas": 0, "cooldownSeconds": 0})
    asleep = _seen(deployed={NEW: Deployed(0, 0)}, due_soon=0)
    assert plan(spec, asleep).scale == {}
    todo = plan(spec, _replace(asleep, due_soon=25))
    assert todo.scale == {NEW: 3} and todo.scaled  # ceil(25 / backlogPerReplica)
    assert "due soon 25" in todo.notices[0].message
    # and a version kept up for a wave due soon is not scaled down before it falls due
    up = _seen(deployed={NEW: Deployed(3, 3)}, due_soon=25, last_scale=0.0)
    assert plan(spec, up).scale == {}
    assert plan(spec, _replace(up, due_soon=0)).scale == {NEW: 0}


def test_the_scale_up_lead_time_is_the_cooldown_unless_it_is_set() -> None:
    assert V2.lead_seconds == V2.cooldownSeconds == 60
    assert V2.model_copy(update={"scaleUpLeadSeconds": 15}).lead_seconds == 15
    assert V2.model_copy(update={"scaleUpLeadSeconds": 0}).lead_seconds == 0
