"""An application serving only the child of ``race2_flows`` (its parent runs elsewhere)."""

from __future__ import annotations

from tests.runtime import race2_flows

r2_kid = race2_flows.r2_kid
