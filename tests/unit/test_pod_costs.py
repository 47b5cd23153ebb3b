"""The deletion cost the operator gives a version's pods before a scale-down: an idle pod
the lowest, a busy one its held deliveries, one whose work is unknown a high cost."""

from __future__ import annotations

from wayline_operator.pod_costs import UNKNOWN_COST, pod_costs


def test_idle_pods_cost_least_and_unknown_ones_most() -> None:
    held: dict[str, int | None] = {
        "shop-abc-busy:7:aa": 4,
        "shop-abc-idle:7:bb": 0,
        "shop-abc-old:7:cc": None,  # a worker of an earlier release: no count
    }
    pods = ["shop-abc-busy", "shop-abc-idle", "shop-abc-old", "shop-abc-new"]
    assert pod_costs(pods, held) == {
        "shop-abc-busy": 4,
        "shop-abc-idle": 0,
        "shop-abc-old": UNKNOWN_COST,
        "shop-abc-new": UNKNOWN_COST,  # no live worker on it (yet)
    }


def test_a_pods_workers_add_up_and_one_unknown_makes_it_unknown() -> None:
    two = {"p1:1:a": 2, "p1:2:b": 3, "p2:1:a": 1, "p2:2:b": None}
    assert pod_costs(["p1", "p2"], two) == {"p1": 5, "p2": UNKNOWN_COST}


def test_a_count_stays_below_the_unknown_cost_and_a_long_name_matches_its_hostname() -> None:
    name = "w" * 70  # a pod's hostname is its name cut to 63 characters
    held: dict[str, int | None] = {f"{name[:63]}:1:a": 10**9}
    assert pod_costs([name], held) == {name: UNKNOWN_COST - 1}
