"""A simulated hook that nobody resumes times out within minutes of virtual time, not an hour
(``workload.HOOK_TIMEOUT``): the seed still reaches ``HOOK_TIMEOUT`` and passes, without an
hour of idle heartbeats, renewals and receives to pay for (docs/simulation.md)."""

from __future__ import annotations

from wayline.sim import run_seed

TEN_MINUTES = 600.0


def test_a_seed_whose_hook_times_out_settles_within_minutes_of_virtual_time() -> None:
    # Seed 8 draws two contenders for one token; the one that takes the token after the
    # holder ended is resumed by nobody, so its hook times out and its run fails.
    outcome = run_seed(8)
    assert outcome.ok, outcome.violations
    assert "run_failed HOOK_TIMEOUT" in outcome.trace
    assert outcome.virtual_seconds < TEN_MINUTES
