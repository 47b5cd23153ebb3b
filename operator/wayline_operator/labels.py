"""A run's search attributes as labels of its WorkflowRun, ``attributes.wayline.dev/<name>``,
so that ``kubectl get wfr -l attributes.wayline.dev/tenant=acme`` finds its runs.

An attribute's name already fits a label's name (``wayline.set_attributes`` checks the same
pattern). Its value is mirrored only where it fits a label's value as it is (at most 63
characters, letters, digits, ``-``, ``_`` and ``.``, a letter or digit at each end): a
string, an integer, a finite float written so, ``true``/``false``. A datetime (``:`` and
``+``), a list, and a string outside those rules are not mirrored rather than rewritten into
something a selector would not find; the run's attributes in the world stay the whole truth.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

PREFIX = "attributes.wayline.dev/"
_VALUE = re.compile(r"(?:[A-Za-z0-9](?:[-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?")


def label_value(value: Any) -> str | None:
    """The label value of one attribute value; None when it cannot be one as it is."""
    if isinstance(value, bool):
        text = "true" if value else "false"
    elif isinstance(value, int | float | str):
        text = str(value)
    else:
        return None
    return text if _VALUE.fullmatch(text) else None


def attribute_labels(attributes: Mapping[str, Any]) -> dict[str, str]:
    """The labels a run with these (typed) search attributes carries. A name that is not a
    label's name (bytes written into the log by someone else: ``set_attributes`` refuses
    such names) is left out, as a value that is not a label's value is, so the labels
    patch never fails on it."""
    out = {}
    for name, value in attributes.items():
        shown = label_value(value)
        if shown is not None and isinstance(name, str) and name and _VALUE.fullmatch(name):
            out[PREFIX + name] = shown
    return out


def labels_patch(current: Mapping[str, Any], wanted: Mapping[str, str]) -> dict[str, str | None]:
    """The metadata.labels merge patch that takes the resource's attribute labels from
    ``current`` (every label it has; others than ours are left alone) to ``wanted``: None
    removes one."""
    patch: dict[str, str | None] = {
        key: None for key in current if key.startswith(PREFIX) and key not in wanted
    }
    patch.update({k: v for k, v in wanted.items() if current.get(k) != v})
    return patch
