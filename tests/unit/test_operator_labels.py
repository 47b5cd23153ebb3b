"""Search attributes as WorkflowRun labels: what fits a label value is mirrored as it is,
what does not is left out, and the patch removes only the attribute labels that went."""

from __future__ import annotations

from datetime import UTC, datetime

from wayline_operator.labels import PREFIX, attribute_labels, labels_patch


def test_values_that_fit_a_label_are_mirrored_as_they_are() -> None:
    labels = attribute_labels(
        {
            "tenant": "acme",
            "amount": 150,
            "ratio": 0.5,
            "vip": False,
            "empty": "",
            "neg": -3,  # a label value starts with a letter or digit
            "spaced": "two words",
            "long": "x" * 64,
            "due": datetime(2026, 1, 1, tzinfo=UTC),
            "tags": ["a"],
        }
    )
    assert labels == {
        PREFIX + "tenant": "acme",
        PREFIX + "amount": "150",
        PREFIX + "ratio": "0.5",
        PREFIX + "vip": "false",
        PREFIX + "empty": "",
    }


def test_the_patch_sets_what_changed_and_removes_only_attribute_labels_that_went() -> None:
    current = {"app": "shop", PREFIX + "tenant": "acme", PREFIX + "stage": "new"}
    wanted = {PREFIX + "tenant": "acme", PREFIX + "amount": "5"}
    assert labels_patch(current, wanted) == {PREFIX + "stage": None, PREFIX + "amount": "5"}
    assert labels_patch(wanted, wanted) == {}


def test_a_name_that_cannot_be_a_label_name_is_left_out() -> None:
    """Names ``set_attributes`` refuses can still be written into a log by someone else: the
    labels patch leaves them out rather than fail (the API server refuses such a label, and
    the resource's status would be written no more)."""
    written = {"tenant": "acme", "bad name": "x", "-edge": "y", "a" * 64: "z", "": "e"}
    assert attribute_labels(written) == {PREFIX + "tenant": "acme"}
