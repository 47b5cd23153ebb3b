"""Recorded definition identities that must never change (docs/durability.md, "Definition
identity"): a run is pinned to the identity of the definition that started it, so a release
whose core computes another identity for the same code strands every pinned run after an
upgrade. The identities below were computed by the core as it was before the mypyc build's
changes to ``_core/identity.py`` (5fe10b0^1) and agree with the runs recorded in
tests/golden/examples.jsonl. A change here is a breaking change of the pin, not a test update."""

from __future__ import annotations

import importlib
import pkgutil

import examples
import pytest

from tests.unit import identity_shapes
from wayline._core.definitions import WorkflowDefinition, shape

RECORDED = {
    "examples.best_effort_quote": (
        "985d76870ffe26cdd667f1249ca00f2d7d47ff60a04adac7d55907031abf219b"
    ),
    "examples.expense": "75756e9df59fce8cd66b44c2a6f2b00257cabab8494cea248be266c3c399961d",
    "examples.notify_user": "d3fb29a954a0ea45403e9de56a33a5fe836ccf0bf6a95beeef0490331f48cccb",
    "examples.order_approval": "8685a0848be22b828db172526ad34275886d08aa330fd522f019f9e32cd85656",
    "examples.publish_video": "dcd29dd6dd8eda394d0c7a71f08f6689263cbc3eb828829f4474f90fe862a2e4",
    "examples.reindex": "92569fbdc9c1eb77a013f7640aba0e027a307fb2d8163bfd811d1747dab0c10b",
    "examples.reservation": "b21553f63e2a1e80810d9915ec73ab398460f2b566fcd3b9f954e9921a3dcd2b",
    "examples.subscription": "32658725ef7d82719cc9300b3c2df6492b73c9f5b04b98d1e8472c63cae593e0",
    "examples.trip": "32f422117b364b3b44d9f35d24ccf6d35bea849c425b540cbcd3aca222f2a082",
    "fulfil": "87592f4c5f17a84e9670e05f805258d7172a9ceda661181577db852d356c2cce",
    "orders": "59c81099213cb310df47b7dcdd5345ca9db5b2243aae7b202956b573f0b8bb18",
    "render_and_publish": "22d85c468e61ecac2b510453d434645c9eb19670a01356b1a4c9f5fbe652d154",
    "idpin.closure": "ed0a75164060f3591a044163ef8d6801751cabdc43bd52444afd5c3e0de4e231",
    "idpin.decorated": "cfb421ba751ea0bd4a42ee212ca8e1377c4d4e698cea604dadc06335588b44c1",
    "idpin.lazy_module": "a42c2435a6f4c4fc8d210cb7b5f4f0b3888e6324a113d4fb8e14635abf16e95c",
    "idpin.metaclass": "6199a24c573bbee1beadcee031c0d2aa32bb3ccc66c3825a178b06056153291e",
    "idpin.nested": "40f69e1e7378e5dc3a1d68f2a445168f43f0979a97967dbc2305d21c452c3cfe",
    "idpin.slotted": "9c7d2fabb695d85055dd27efb9676471a258c8dfda6e47df45fe219ce458ff38",
}


def _workflows() -> dict[str, WorkflowDefinition[..., object]]:
    found: dict[str, WorkflowDefinition[..., object]] = {}
    for info in pkgutil.walk_packages(examples.__path__, "examples."):
        module = importlib.import_module(info.name)
        for value in vars(module).values():
            if isinstance(value, WorkflowDefinition) and value.fn.__module__ == module.__name__:
                found[value.name] = value
    for workflow in identity_shapes.ALL:
        found[workflow.name] = workflow
    return found


WORKFLOWS = _workflows()


def test_every_example_workflow_has_a_recorded_identity() -> None:
    """A new example gets its identity recorded here, so that it is pinned from then on."""
    assert sorted(WORKFLOWS) == sorted(RECORDED)


@pytest.mark.parametrize("name", sorted(RECORDED))
def test_the_identity_is_the_recorded_one(name: str) -> None:
    assert WORKFLOWS[name].identity == RECORDED[name], shape(WORKFLOWS[name])


def test_what_the_unusual_references_contribute() -> None:
    """What each way of reaching a step adds to the shape, as recorded. Some reach nothing, and
    must keep reaching nothing, since adding them would change the identities of live runs: a
    name the code calls through a closure's variable or a decorator's wrapper (not a name of the
    code), a static or class method (not a plain function in the class's namespace), and a name
    only a module's ``__getattr__`` or a metaclass's ``__getattr__`` answers."""
    steps = {w.name: sorted(shape(w)["steps"]) for w in identity_shapes.ALL}
    assert steps == {
        "idpin.slotted": ["idpin.charge", "idpin.ship"],
        "idpin.nested": ["idpin.ship"],
        "idpin.closure": [],
        "idpin.lazy_module": ["idpin.lazy.real_charge"],
        "idpin.metaclass": ["idpin.charge"],
        "idpin.decorated": ["idpin.refund"],
    }
    assert shape(identity_shapes.through_nested)["children"] == ["idpin.kid"]
