"""Durations, settings, serialisation, ids and the pinned public API."""

from __future__ import annotations

import dataclasses
from datetime import timedelta

import pydantic
import pytest

import wayline
from wayline._core.definitions import WorkflowDefinition
from wayline._core.ids import is_run_id, new_run_id
from wayline._core.serde import decode, encode
from wayline.durations import to_seconds
from wayline.errors import ConfigurationError
from wayline.settings import Settings


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        (5, 5.0),
        (1.5, 1.5),
        (timedelta(minutes=2), 120.0),
        ("10s", 10.0),
        ("1h", 3600.0),
        ("1h30m", 5400.0),
        ("250ms", 0.25),
        ("2d", 172800.0),
        (" 3 ", 3.0),
        ("1w", 604800.0),
    ],
)
def test_durations(value: object, seconds: float) -> None:
    assert to_seconds(value) == pytest.approx(seconds)  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", ["", "soon", "10 parsecs", "-5", -1, True, None, "1h-3m"])
def test_bad_durations_say_what_was_wrong(bad: object) -> None:
    with pytest.raises(ValueError, match="duration"):
        to_seconds(bad)  # type: ignore[arg-type]


def test_settings_from_an_injected_mapping() -> None:
    s = Settings.from_env({})
    assert (s.inline_ownership, s.lease_seconds, s.max_queue_deliveries, s.max_inline_steps) == (
        True,
        860.0,
        48,
        3,
    )
    s = Settings.from_env(
        {
            "WORKFLOW_INLINE_OWNERSHIP": "false",
            "WORKFLOW_INLINE_OWNERSHIP_LEASE_SECONDS": "5000",
            "WORKFLOW_MAX_INLINE_STEPS": "40",
        }
    )
    assert not s.inline_ownership and s.lease_seconds == 900 and s.max_inline_steps == 16
    assert (
        Settings.from_env(
            {"WORKFLOW_INLINE_OWNERSHIP": "0", "WORKFLOW_INLINE_OWNERSHIP_LEASE_SECONDS": "0"}
        ).lease_seconds
        == 1
    )
    with pytest.raises(ConfigurationError, match="WORKFLOW_INLINE_OWNERSHIP"):
        Settings.from_env({"WORKFLOW_INLINE_OWNERSHIP": "maybe"})
    with pytest.raises(ConfigurationError, match="LEASE"):
        Settings.from_env({"WORKFLOW_INLINE_OWNERSHIP_LEASE_SECONDS": "long"})


def test_worker_refuses_an_invocation_bound_not_below_the_lease() -> None:
    world = wayline.LocalWorld(":unused:", visibility_seconds=5)  # 50 + 5 < 60
    s = Settings.from_env(
        {"WORKFLOW_INLINE_OWNERSHIP_LEASE_SECONDS": "60", "WAYLINE_MAX_INVOCATION_SECONDS": "60"}
    )
    with pytest.raises(ConfigurationError, match="must be below"):
        wayline.Worker(world, [], settings=s)
    wayline.Worker(
        world,
        [],
        settings=Settings.from_env(
            {
                "WORKFLOW_INLINE_OWNERSHIP_LEASE_SECONDS": "60",
                "WAYLINE_MAX_INVOCATION_SECONDS": "50",
            }
        ),
    )


def test_run_ids_are_wf_and_128_random_bits() -> None:
    ids = {new_run_id() for _ in range(1000)}
    assert len(ids) == 1000 and all(is_run_id(i) for i in ids)


@dataclasses.dataclass
class P:
    a: int


class M(pydantic.BaseModel):
    b: str


def test_serde_round_trips_models_and_names_the_culprit() -> None:
    assert encode({"p": P(1), "m": M(b="x")}, what="v") == {"p": {"a": 1}, "m": {"b": "x"}}
    assert decode({"a": 2}, P, what="v") == P(2)
    assert decode({"b": "y"}, M, what="v") == M(b="y")
    with pytest.raises(wayline.SerializationError, match=r"step 'charge'.*object"):
        encode(object(), what="step 'charge' arguments")
    with pytest.raises(wayline.SerializationError, match="a"):
        decode({"a": "not a number"}, P, what="input")
    with pytest.raises(wayline.SerializationError):
        encode(float("nan"), what="x")


def test_public_api_is_pinned() -> None:
    assert sorted(wayline.__all__) == sorted(
        [
            "AllFailedError",
            "ErrorCause",
            "any",
            "RetryPolicy",
            "Reversal",
            "Abandonment",
            "Duration",
            "HookHandle",
            "RunInfo",
            "StepDefinition",
            "WorkflowDefinition",
            "WorkflowInfo",
            "workflow_info",
            "Limit",
            "RateLimit",
            "Debounce",
            "StreamChunk",
            "StreamClosedError",
            "stream",
            "ChildFailedError",
            "ChildOptions",
            "ChildTimeoutError",
            "ContinueAsNewError",
            "child",
            "child_with",
            "Client",
            "ConfigurationError",
            "CorruptEntryError",
            "CorruptLogError",
            "FatalError",
            "Hook",
            "HookBufferOccupiedError",
            "ForkRefusedError",
            "HookInfo",
            "HookNotFoundError",
            "HookTimeout",
            "HookWaitTimeoutError",
            "IdConflictPolicy",
            "IdReusePolicy",
            "InvalidAttributesError",
            "InvalidIdError",
            "InvalidPayloadError",
            "InvalidQueryError",
            "LocalWorld",
            "NotInStepError",
            "NotInWorkflowError",
            "PayloadTooLargeError",
            "ReplayDivergenceError",
            "ResultTimeoutError",
            "RetryableError",
            "Redrive",
            "RedriveRefusedError",
            "RunAlreadyExistsError",
            "RunCancelledError",
            "RunFailedError",
            "RunHandle",
            "RunNotFoundError",
            "RunTerminalError",
            "RunStatus",
            "SerializationError",
            "Settings",
            "StartOptions",
            "StepContext",
            "StepFailedError",
            "WaylineError",
            "Worker",
            "WorkflowNotFoundError",
            "World",
            "WorldStorageFullError",
            "WorldUnavailableError",
            "WrongNamespaceError",
            "continue_as_new",
            "continue_as_new_keeping_version",
            "create_hook",
            "gather",
            "now",
            "open_world",
            "patched",
            "race",
            "random",
            "set_attributes",
            "sleep",
            "step",
            "step_context",
            "uuid4",
            "workflow",
        ]
    )
    for name in wayline.__all__:
        assert getattr(wayline, name) is not None
    # The NATS world is imported on first use (it needs the nats extra), and is the only name
    # found that way: a misspelt one is an AttributeError, as a type checker says it is.
    assert wayline.NatsWorld.__name__ == "NatsWorld"
    with pytest.raises(AttributeError, match="slep"):
        wayline.slep  # type: ignore[attr-defined]  # noqa: B018


def test_open_world_urls(tmp_path: object) -> None:
    assert str(wayline.open_world("sqlite:///rel/w.db").path) == "rel/w.db"  # type: ignore[attr-defined]
    assert str(wayline.open_world("sqlite:////abs/w.db").path) == "/abs/w.db"  # type: ignore[attr-defined]
    for bad in ("postgres://x", "sqlite://", "w.db"):
        with pytest.raises(ConfigurationError, match="sqlite"):
            wayline.open_world(bad)


def test_retryable_error_takes_durations() -> None:
    assert wayline.RetryableError("x", retry_after="2s").retry_after == 2.0
    assert wayline.RetryableError("x", retry_after=timedelta(seconds=3)).retry_after == 3.0


def test_errors_have_stable_codes() -> None:
    assert wayline.ReplayDivergenceError("x").code == "REPLAY_DIVERGENCE"
    assert wayline.HookTimeout("x").code == "HOOK_TIMEOUT"
    assert wayline.HookWaitTimeoutError("x").code == "HOOK_WAIT_TIMEOUT"
    assert wayline.InvalidIdError("x").code == "INVALID_ID"
    exists = wayline.RunAlreadyExistsError("x", run_id="wf_1", status="running")
    assert (exists.code, exists.run_id, exists.status) == ("RUN_ALREADY_EXISTS", "wf_1", "running")
    assert issubclass(wayline.SerializationError, wayline.FatalError)
    assert issubclass(wayline.WorldUnavailableError, wayline.WaylineError)


async def test_unreadable_database_is_a_clear_error(tmp_path: pytest.TempPathFactory) -> None:
    bad = tmp_path / "not-a-db.db"  # type: ignore[operator]
    bad.write_bytes(b"this is not sqlite at all" * 100)
    with pytest.raises(wayline.WorldUnavailableError, match="not a SQLite database"):
        async with wayline.LocalWorld(bad):
            pass
    locked_dir = tmp_path / "ro"  # type: ignore[operator]
    locked_dir.mkdir()
    target = locked_dir / "sub" / "w.db"
    locked_dir.chmod(0o500)
    try:
        import os

        if os.geteuid() != 0:  # root ignores directory permissions
            with pytest.raises(wayline.WorldUnavailableError, match="cannot be opened"):
                async with wayline.LocalWorld(target):
                    pass
    finally:
        locked_dir.chmod(0o700)


async def test_locked_database_is_a_clear_error(tmp_path: pytest.TempPathFactory) -> None:
    import sqlite3

    path = tmp_path / "w.db"  # type: ignore[operator]
    async with wayline.LocalWorld(path, busy_timeout=0.2) as world:
        other = sqlite3.connect(path, isolation_level=None)
        other.execute("BEGIN EXCLUSIVE")
        try:
            with pytest.raises(wayline.WorldUnavailableError, match="locked"):
                await world.enqueue("flow", {"x": 1})
        finally:
            other.execute("ROLLBACK")
            other.close()
        await world.enqueue("flow", {"x": 1})  # nothing lost: it works once the lock is gone
        assert len(await world.receive("flow", wait_seconds=1)) == 1


def _namesake_a() -> WorkflowDefinition:
    @wayline.workflow
    async def namesake_flow() -> str:
        return "a"

    return namesake_flow


def _namesake_b() -> WorkflowDefinition:
    @wayline.workflow
    async def namesake_flow() -> str:
        return "b"

    return namesake_flow


def test_two_workflows_with_one_name_are_refused() -> None:
    first = _namesake_a()
    assert _namesake_a().name == first.name  # the same function defined again is no conflict
    with pytest.raises(ConfigurationError, match=r"two different workflows .*pass name="):
        _namesake_b()  # at registration

    @wayline.workflow(name="namesake", revision=1)
    async def one() -> str:
        return "1"

    @wayline.workflow(name="namesake", revision=2)
    async def two() -> str:
        return "2"

    world = wayline.LocalWorld(":unused:")
    for make in (lambda w: wayline.Worker(world, w), lambda w: wayline.Client(world, w)):
        with pytest.raises(ConfigurationError, match=r"two different workflows .*'namesake'"):
            make([one, two])  # at Worker (and Client) construction: one would shadow the other
        assert make([one, one]) is not None  # the same definition twice is harmless


def test_a_step_defined_as_a_method_is_refused_where_it_is_declared() -> None:
    """A method's ``self`` would never be bound (a step is not a descriptor): refused at once,
    not as "missing a required argument" when a run calls it."""
    with pytest.raises(wayline.ConfigurationError, match=r"method .*Svc\.charge"):

        class Svc:
            @wayline.step(name="basics.method_step")
            async def charge(self, cents: int) -> int:
                return cents

    def factory() -> object:
        @wayline.step(name="basics.nested_step")
        async def nested(self: int) -> int:  # a nested function may name its first "self"
            return self

        return nested

    assert factory() is not None
