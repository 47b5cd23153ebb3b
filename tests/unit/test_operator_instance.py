"""Which resources an operator instance owns (``wayline_operator.instance``): a label names
one owner, an unlabelled resource belongs to the namespaced operator that watches it and to
no cluster-wide one; each instance has a finalizer of its own; the world recorded beside the
instance carries no credentials; a schedule's runs carry its label."""

from __future__ import annotations

import re

from wayline_operator.instance import LABEL, Ownership, finalizer_for, world_name
from wayline_operator.schedule_resource import WorkflowScheduleSpec
from wayline_operator.schedules import run_manifest


def _run(labels: dict[str, str] | None = None) -> dict[str, object]:
    return {"metadata": {"name": "r", "namespace": "prod", "labels": labels or {}}}


def test_a_label_names_the_one_owner_wherever_it_watches() -> None:
    for namespaced in (True, False):
        assert Ownership("wl", namespaced).owns(_run({LABEL: "wl"}))
        assert not Ownership("prod", namespaced).owns(_run({LABEL: "wl"}))


def test_an_unlabelled_run_is_the_namespaced_operators_never_a_cluster_wide_ones() -> None:
    assert Ownership("prod", namespaced=True).owns(_run())
    assert not Ownership("wl", namespaced=False).owns(_run())
    assert not Ownership("wl", namespaced=False).owns({"metadata": {}})


def test_each_instance_has_its_own_finalizer_and_each_is_a_qualified_name() -> None:
    names = {finalizer_for(i) for i in ("wl", "prod", "n" * 63)}
    assert len(names) == 3
    for name in names:
        prefix, _, rest = name.partition("/")
        assert prefix == "wayline.dev" and len(rest) <= 63
        assert re.fullmatch(r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?", rest)


def test_the_world_is_named_without_credentials() -> None:
    url = "nats://u:secret@a.svc:4222,b.svc:4222?prefix=wl&replicas=3&nkeys_seed=/s"
    assert world_name(url) == "nats://a.svc:4222,b.svc:4222?prefix=wl"
    assert world_name("sqlite:////var/w.db") == "sqlite:////var/w.db"
    assert world_name("tls://$(NATS_USER):$(NATS_PASSWORD)@n:4222") == "tls://n:4222"


def test_a_schedules_runs_carry_its_instance_label_so_they_have_its_owner() -> None:
    spec = WorkflowScheduleSpec.model_validate({"schedule": "* * * * *", "workflow": "w"})
    schedule = {
        "apiVersion": "wayline.dev/v1alpha1",
        "kind": "WorkflowSchedule",
        "metadata": {"name": "s", "namespace": "prod", "uid": "u1", "labels": {LABEL: "wl"}},
    }
    labelled = run_manifest(schedule, spec, 600.0)
    assert labelled["metadata"]["labels"][LABEL] == "wl"
    assert Ownership("wl").owns(labelled) and not Ownership("prod", True).owns(labelled)
    del schedule["metadata"]["labels"]  # type: ignore[attr-defined]
    plain = run_manifest(schedule, spec, 600.0)
    assert LABEL not in plain["metadata"]["labels"]
