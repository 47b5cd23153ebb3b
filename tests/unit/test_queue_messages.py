"""Queue messages are built by one typed constructor per kind (``_core.messages``): what each
writes is what the decoder (``_engine.messages``) reads back, and a message the decoder
cannot take is refused, not guessed at."""

from __future__ import annotations

from typing import Any

import pydantic
import pytest

from wayline._core.messages import (
    Backstop,
    ConcurrencyRetry,
    StepStart,
    WaitDue,
    Wake,
    WakeReason,
)
from wayline._engine.messages import FlowMessage, StepMessage

RUN = "wf_" + "1" * 32


@pytest.mark.parametrize("reason", list(WakeReason))
def test_every_wake_reads_back_with_its_reason(reason: WakeReason) -> None:
    wire = Wake(RUN, reason).to_wire()
    assert wire == {"runId": RUN, "reason": reason.value}
    read = FlowMessage.model_validate(wire)
    assert (read.runId, WakeReason(read.reason or "")) == (RUN, reason)


@pytest.mark.parametrize(
    ("message", "extra"),
    [
        (Wake(RUN, WakeReason.START, log_mark="7:3"), {"logMark": "7:3"}),
        (Backstop(RUN, "s1:2"), {"backstopKey": "s1:2"}),
        (WaitDue(RUN, "w1"), {"waitId": "w1"}),
        (ConcurrencyRetry(RUN, 3), {"tries": 3}),
    ],
)
def test_each_flow_message_kind_is_accepted_by_the_decoder(
    message: Any, extra: dict[str, Any]
) -> None:
    wire = message.to_wire()
    read = FlowMessage.model_validate(wire)
    assert read.runId == RUN and WakeReason(read.reason or "") in WakeReason
    assert {k: wire[k] for k in extra} == extra
    assert read.model_dump(exclude_none=True) == wire  # nothing lost on the way


def test_a_step_start_is_accepted_by_the_decoder() -> None:
    wire = StepStart(RUN, "s1", "charge").to_wire()
    read = StepMessage.model_validate(wire)
    assert (read.runId, read.stepId, read.stepName) == (RUN, "s1", "charge")


@pytest.mark.parametrize(
    ("model", "wire"),
    [
        (FlowMessage, {"reason": "start"}),  # no run
        (FlowMessage, {"runId": "", "reason": "start"}),
        (FlowMessage, {"runId": RUN, "reason": 5}),
        (StepMessage, {"runId": RUN, "stepId": "s1"}),  # no step name
        (StepMessage, {"runId": RUN, "stepId": "", "stepName": "charge"}),
    ],
)
def test_a_bad_message_is_refused(model: type[pydantic.BaseModel], wire: dict[str, Any]) -> None:
    with pytest.raises(pydantic.ValidationError):
        model.model_validate(wire)


def test_a_reason_is_not_free_text() -> None:
    with pytest.raises(ValueError, match="'chlid' is not a valid WakeReason"):
        WakeReason("chlid")
