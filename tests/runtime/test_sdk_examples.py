"""The SDK examples run to the answers their docstrings promise."""

from __future__ import annotations

from examples import first_success, retry_policy, time_skipping, typed_hooks


async def test_retry_policy_example() -> None:
    ok, gone = await retry_policy.main()
    assert ok == "reserved BOOK-42 on attempt 3"
    assert gone == (
        "not reserved: step 'examples.reserve' raised OutOfStock: GONE "
        "(attempt 1 of 5, OutOfStock is non-retryable)"
    )


async def test_typed_hooks_example() -> None:
    refused, approvers = await typed_hooks.main()
    assert "approved" in refused
    assert approvers == ["ana", "bo"]


async def test_first_success_example() -> None:
    one, none = await first_success.main()
    assert one["provider"] == "acme" and one["workflow"] == "examples.best_effort_quote"
    assert one["priceCents"] == 110  # whole cents, not 110.00000000000001
    assert len(none["errors"]) == 2  # type: ignore[arg-type]


async def test_time_skipping_example() -> None:
    out = await time_skipping.main()
    assert out["days"] == 360 and len(out["receipts"]) == 12  # type: ignore[arg-type]


async def test_step_streams_example() -> None:
    from examples import step_streams

    out = await step_streams.main()
    assert out[3] == "-- attempt 2 starts over"
    assert out[-2:] == ["8: 100% (attempt 2)", "cat.mp4"]


async def test_concurrency_limit_example() -> None:
    from examples import concurrency_limit

    log = await concurrency_limit.main()
    ana = [line for line in log if line.split()[1] in ("o0", "o1", "o2")]
    # one of ana's orders at a time: every pack is followed by its own packed
    for start, end in zip(ana[::2], ana[1::2], strict=True):
        assert start.startswith("pack ") and end == f"packed {start.split()[1]}"
    assert len(log) == 8


async def test_step_concurrency_example() -> None:
    from examples import step_concurrency

    log = await step_concurrency.main()
    live: set[str] = set()
    most = 0
    for line in log:  # at most two eu renders at once, every render once
        what, region, job = line.split()
        if region == "eu":
            (live.add if what == "render" else live.discard)(job)
            most = max(most, len(live))
    assert most <= 2
    assert sorted(line for line in log if line.startswith("render ")) == sorted(
        f"render {'eu' if i < 5 else 'us'} j{i}" for i in range(7)
    )


async def test_trip_saga_example() -> None:
    from examples import trip_saga

    out = await trip_saga.main()
    assert out[:2] == [
        "examples.charge_card:compensate (reverses s2)",
        "examples.book_flight:compensate (reverses s1)",
    ]
    assert out[2].endswith(
        "failed: step 'examples.book_hotel' raised FatalError: no room left "
        "(attempt 1 of 1, FatalError is never retried), and its compensation was abandoned"
    )


async def test_rate_limit_example() -> None:
    from examples import rate_limit

    sent = await rate_limit.main()
    ana = sorted(at for user, at in sent if user == "ana")
    assert len(ana) == 4 and [user for user, _ in sent].count("bob") == 1
    assert ana[-1] - ana[0] >= 0.5 * 3 / 5  # "5/s", burst 1: four starts span 0.6 s at least


async def test_debounce_example() -> None:
    from examples import debounce

    assert sorted(await debounce.main()) == ["changelog v1", "readme v5"]
