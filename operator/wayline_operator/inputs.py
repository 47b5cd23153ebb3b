"""``spec.inputFrom``: a run's input read from a ConfigMap or Secret key of the resource's
namespace, for an input too large for ``kubectl apply`` (whose last-applied annotation holds
at most 256 KiB). It is read once, when the run starts: the run keeps the input it started
with (``Client.start`` of the same run id starts nothing twice), whatever the key says later."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from .kube import read_key
from .reconcile import InvalidSpec, parse_spec


class InputNotFound(Exception):
    """The ConfigMap or Secret, or its key, is not there (yet), or the operator may not read
    it: the start is tried again, as a pod waits for its ConfigMap."""


async def resolve(spec: Mapping[str, Any], namespace: str | None) -> Mapping[str, Any]:
    """The spec to start the run with: ``spec`` itself, or with ``inputFrom`` read into
    ``input``. ``InvalidSpec`` for a value that is not JSON."""
    parsed = parse_spec(spec)
    if parsed.inputFrom is None:
        return spec
    kind, ref = parsed.inputFrom.ref
    where = f"{kind} {namespace}/{ref.name}"
    found, text = await read_key(kind, namespace or "default", ref.name, ref.key)
    if text is None:
        raise InputNotFound(f"spec.inputFrom: {where} {found}")
    try:
        value = json.loads(text)
    except ValueError as err:
        problem = f"spec.inputFrom: key {ref.key!r} of {where} is not JSON: {err}"
        raise InvalidSpec(problem) from None
    resolved = {k: v for k, v in spec.items() if k != "inputFrom"}
    resolved["input"] = value
    return resolved
