"""The peering gate follows kopf's own pause toggle (``wayline_operator.peering``): the status
pump stands still on a paused replica. The real two-replica behaviour is in
tests/operator/test_operator_ops.py; this pins the kopf seam it relies on."""

from __future__ import annotations

import inspect

from kopf._cogs.aiokits.aiotoggles import Toggle
from kopf._core.engines import peering as kopf_peering

from wayline_operator.peering import Gate, follow_kopf


async def test_the_gate_reads_the_toggles_kopf_hands_its_peering_processor() -> None:
    assert "conflicts_found" in inspect.signature(kopf_peering.process_peering_event).parameters
    gate = Gate()
    assert not gate.paused  # standalone
    original = kopf_peering.process_peering_event
    try:
        follow_kopf(gate)
        assert gate.paused  # peering is mandatory now, and kopf has not looked at peers yet
        toggle = Toggle(False, name="wayline@ns")
        event = {"object": {"metadata": {"name": "not-this-one"}}}  # kopf ignores it
        await kopf_peering.process_peering_event(
            raw_event=event,
            namespace="ns",
            resource=None,
            identity="me",
            settings=_Settings(),
            conflicts_found=toggle,
        )
        assert not gate.paused
        await toggle.turn_to(True)  # kopf pauses this replica
        assert gate.paused
        follow_kopf(gate)  # a second call wraps nothing twice
        assert kopf_peering.process_peering_event.wayline_gate is gate  # type: ignore[attr-defined]
    finally:
        kopf_peering.process_peering_event = original


class _Peering:
    name = "wayline"


class _Settings:
    peering = _Peering()
