"""An application serving only the parent of ``race2_flows`` (its child runs elsewhere)."""

from __future__ import annotations

from tests.runtime import race2_flows

r2_parent = race2_flows.r2_parent
