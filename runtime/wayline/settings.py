"""Every tunable in one typed object, read from one injectable mapping.

Environment variables are read here and nowhere else, so a test can pass its own mapping
instead of touching ``os.environ``. The seed's names stand as they are.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field

from ._core import clock, jsoncodec
from ._core.dispatch import MAX_LEASE_SECONDS
from ._core.limits import Limits
from ._core.planning import HELD_DELAY_FLOOR, HELD_DELAY_MAX, HELD_DELAY_MIN
from .errors import ConfigurationError

PROMPT_WAKE_MAX = 5.0
"""The longest ``prompt_wake_seconds``: a delivery waiting in process holds a worker slot, so
the wait is kept short, well under any visibility or hand-off time."""

# Seed 000, "Why a fixed constant, and why 860 seconds": longer than any invocation may live
# (Wayline's workers enforce WAYLINE_MAX_INVOCATION_SECONDS=800 below it), and under the
# 900 s ceiling so a single delayed backstop always suffices.
DEFAULT_LEASE_SECONDS = 860.0
MIB = 1024 * 1024
PRIORITY_RANGE = (-(2**31), 2**31 - 1)
"""The operator's peering priorities (kopf compares them; a random one is drawn above 0)."""
PEERING_LIFETIME_RANGE = (5, 2**31 - 1)
"""Seconds a silent operator replica is presumed alive: 0 would presume every replica dead
at once, and all of them would work. Kopf renews a replica's entry every ``lifetime - 5..10``
seconds, at least every second: under 5 s a renewal could come after its own deadline."""


@dataclass(frozen=True, slots=True)
class Settings:
    inline_ownership: bool = True
    """``WORKFLOW_INLINE_OWNERSHIP``: 0/false is the kill switch (dispatch only; stamping stays)."""

    lease_seconds: float = DEFAULT_LEASE_SECONDS
    """``WORKFLOW_INLINE_OWNERSHIP_LEASE_SECONDS``, seconds, clamped to 1..900 (seed 000)."""

    max_queue_deliveries: int = 48
    """``WORKFLOW_MAX_QUEUE_DELIVERIES``: a flow delivery beyond this attempt fails the run
    (``MAX_DELIVERIES_EXCEEDED``) instead of crash-looping forever. 48 as the reference."""

    history_warn_events: int = 10_240
    """``WAYLINE_HISTORY_WARN_EVENTS``: events in one run's log past which a worker records
    one ``history_large`` warning event and counts it (``wayline_histories_large``); 0 never
    warns. 10,240 as Temporal warns: a log that long is read whole on every replay that
    starts from the log (a worker restart, a rebuild), so it asks for ``continue_as_new``."""

    history_limit_events: int = 51_200
    """``WAYLINE_HISTORY_LIMIT_EVENTS``: events in one run's log past which a worker fails
    the run (``HISTORY_LIMIT_EXCEEDED``, naming ``wayline.continue_as_new``); 0 never fails
    one. 51,200 as Temporal's hard limit: past it, one replay from the log reads tens of MB."""

    replay_cache_runs: int = 256
    """``WAYLINE_REPLAY_CACHE_RUNS``: runs whose suspended replay a worker keeps for their next
    wake, least recently used dropped first; 0 keeps none (every wake replays from the log's
    first event). A kept replay holds its workflow's coroutine and folded state, typically
    tens of kB: 256 bounds that to a few MB while covering a worker's busy runs."""

    prompt_wake_seconds: float = 0.25
    """``WAYLINE_PROMPT_WAKE_SECONDS``, seconds, from 0 (off) to 5: a delivery that leaves its
    run waiting on a sleep or a timeout due within this long keeps the run and wakes it in
    this process when it is due, instead of acknowledging and waiting for the delayed message
    it armed (which stays armed: it wakes the run if this worker dies first, and is
    acknowledged as a duplicate when it comes here after the wake). 0.25 s because
    nats-server fires no message schedule sooner than 250 ms after it is stored, so a shorter
    sleep took that long on NATS; the delivery and its worker slot are held no longer than
    that for it (docs/durability.md, "Short sleeps")."""

    max_inline_steps: int = 3
    """``WORKFLOW_MAX_INLINE_STEPS``, 1..16: new steps run lazily inline per suspension; the
    rest are created eagerly and queued. 3 as the reference runtime."""

    max_invocation_seconds: float = 800.0
    """``WAYLINE_MAX_INVOCATION_SECONDS``: the kill bound a worker enforces on one delivery, so
    that a lease longer than it proves the owner dead. Must stay below the lease."""

    handoff_seconds: float | None = None
    """``WAYLINE_HANDOFF_SECONDS``: a run driven this long under one delivery is handed off at
    its next step boundary (ack + continue under a new message). Default: half of
    ``max_invocation_seconds``; must be below it."""

    visibility_seconds: float = 30.0
    """``WAYLINE_VISIBILITY_SECONDS``: how long a held delivery stays invisible without a
    renewal. Workers renew every third of it; a dead worker's delivery returns after it."""

    held_delay_seconds: float = HELD_DELAY_MIN
    """``WAYLINE_HELD_DELAY_SECONDS``, seconds, from 0.1 to 30: how long a delivery
    handed back because it owns a step its run's pause holds stays away the first time (a
    quarter of the pause's age after that, never more than 30 s: ``planning.held_delay``).
    The step runs at most this long after an unpause that follows a short pause, and the
    paused run's log is read once per return. 2 s keeps those reads few; tests that pause
    over such a step set it short so they do not wait on it. The floor of 0.1 s bounds the
    returns of a worker that cannot read the pause's age (``planning.HELD_DELAY_FLOOR``)."""

    poll_interval_seconds: float = 0.05
    """``WAYLINE_POLL_INTERVAL``: how often an idle consumer re-checks a store that cannot
    notify other processes (SQLite). In-process enqueues wake consumers at once."""

    definition_mismatch: str = "wait"
    """``WAYLINE_DEFINITION_MISMATCH``: what a worker does with a message of a run pinned to
    another definition (one sent before the pin, on the workflow's route: routing keeps the
    others away): ``wait`` (it is sent on to the run's own route, for a matching worker) or
    ``fail`` (the run fails with ``DEFINITION_MISMATCH``). Never: drive it with another
    definition."""

    world_url: str = "sqlite:///.wayline/wayline.db"
    """``WAYLINE_WORLD``: the default world for the CLI and ``open_world``."""

    console_url: str | None = None
    """``WAYLINE_CONSOLE_URL``: the console's address as callers outside reach it
    (``https://wayline.example.com``); a hook created with ``webhook=True`` gets its URL under
    it (docs/console.md, "Webhook URLs"). Unset: ``webhook=True`` is refused at creation."""

    webhook_secrets: tuple[str, ...] = ()
    """``WAYLINE_WEBHOOK_SECRET`` (comma-separated), else the lines of the file
    ``WAYLINE_WEBHOOK_SECRET_FILE`` names: the keys of the webhook URLs' signatures, shared by
    the workers and the console. The first signs, any of them verifies, so a rotation adds
    the new key first, then drops the old one once no URL signed with it is still wanted."""

    nats_monitors: tuple[str, ...] = ()
    """``WAYLINE_NATS_MONITOR``: the monitoring URLs (``http://HOST:8222``, comma-separated,
    one per node) of the NATS servers the world writes to. A worker reads their sync setting
    at start and logs one warning line when a server acknowledges writes before they are on
    disk (docs/nats.md, "What each sync setting loses"): the client protocol does not tell,
    so without them a worker says nothing. ``wayline doctor`` takes them too."""

    operator_status_interval_seconds: float = 1.0
    """``WAYLINE_OPERATOR_STATUS_INTERVAL_SECONDS``: at most one status write per run this often
    (changes in between are coalesced into the next write)."""

    operator_patches_per_second: float = 100.0
    """``WAYLINE_OPERATOR_PATCHES_PER_SECOND``: at most this many status writes per second."""

    operator_resync_seconds: float = 300.0
    """``WAYLINE_OPERATOR_RESYNC_SECONDS``: how often every live run is read again, for what
    the world's change feed missed (written only if it moved)."""

    operator_change_feed: bool = True
    """``WAYLINE_OPERATOR_CHANGE_FEED``: ``off`` follows the resync alone."""

    operator_api_threads: int = 16
    """``WAYLINE_OPERATOR_API_THREADS``: threads for the operator's own API writes."""

    operator_sweep_seconds: float = 60.0
    """``WAYLINE_OPERATOR_SWEEP_SECONDS``: how often the operator re-arms runs with no wake
    coming."""

    start_rearm_seconds: float = 60.0
    """``WAYLINE_START_REARM_SECONDS``: how often a running worker looks for runs of its
    workflows left ``pending`` with no start message (a starter that died between the run's
    ``run_created`` and its message); one found so on two looks in a row is started again.
    So such a run moves within two to two and a half periods (each pause is 1 to 1.25 of it).
    60 s as the operator's sweep: each look lists the pending runs (a read of every run's last
    entry on NATS) and, when one of them is this worker's, reads every stored queue message (as
    startup recovery does; on SQLite on the worker's event loop). 0 turns it off (startup
    recovery and ``wayline recover`` remain)."""

    operator_hook_retry_seconds: float = 5.0
    """``WAYLINE_OPERATOR_HOOK_RETRY_SECONDS``: how often a WorkflowHook whose run has not
    reached its hook yet tries again."""

    operator_identity: str | None = None
    """``POD_ID``: the operator's peering identity (the chart sets it to the pod's name from the
    downward API); unset, the operator derives one that needs no passwd entry."""

    operator_peering: str | None = None
    """``WAYLINE_OPERATOR_PEERING``: a (Cluster)KopfPeering name shared by the replicas."""

    operator_instance: str | None = None
    """``WAYLINE_OPERATOR_INSTANCE``: the operator's instance id, which the label
    ``wayline.dev/instance`` of the resources it owns names (the chart: the release's
    ``<namespace>.<name>``); unset, ``default``. See ``wayline_operator.instance``."""

    operator_priority: int | None = None
    """``WAYLINE_OPERATOR_PRIORITY``: this replica's peering priority (unset: a random one)."""

    operator_peering_lifetime: int = 60
    """``WAYLINE_OPERATOR_PEERING_LIFETIME``: seconds a silent replica is presumed alive."""

    operator_schedule_seconds: float = 10.0
    """``WAYLINE_OPERATOR_SCHEDULE_SECONDS``: how often each WorkflowSchedule is checked for a
    due tick (a tick starts at most this late; 10 s as the CronJob controller)."""

    schedule_clock_rate: float = 1.0
    """``WAYLINE_SCHEDULE_CLOCK_RATE``: for tests only, schedules read a clock that runs this
    many times faster than real time from ``schedule_clock_origin``, so every process sharing
    the two values agrees on the time and a minute's tick comes in a second."""

    schedule_clock_origin: float = 0.0
    """``WAYLINE_SCHEDULE_CLOCK_ORIGIN``: seconds since the epoch where the fast clock starts."""

    operator_worker_seconds: float = 10.0
    """``WAYLINE_OPERATOR_WORKER_SECONDS``: how often each WorkflowWorker's versions are looked
    at (a drained version is deleted, a backlog is scaled for, at most this late)."""

    worker_version: str | None = None
    """``WAYLINE_WORKER_VERSION``: the WorkflowWorker version a worker belongs to (the operator
    sets it in the version's pods); its registry entries record it, so the operator learns
    which definition identities each version serves. None: a worker of no version."""

    worker_draining: bool = False
    """``WAYLINE_WORKER_DRAINING``: the worker drives the runs already pinned to the
    definitions it serves but takes no run's first delivery (it does not consume the route of
    runs not pinned yet), so new runs go to the workers of the current version. The operator
    sets it in the pods of every WorkflowWorker version that is not the current one. False: a
    worker takes new runs as well."""

    # Size limits, in bytes of the stored (compact JSON) form, checked before anything is
    # written. A value over ``inline_payload_bytes`` is stored out of line (a JetStream Object
    # Store bucket, a SQLite blob table) and its event carries a reference, so these bound
    # what a worker holds in memory, not what a NATS message can carry. 64 MiB: a payload
    # that large is read whole into the memory of every worker that replays the run.
    max_input_bytes: int = 64 * MIB
    """``WAYLINE_MAX_INPUT_BYTES``: a run's input (``Client.start``, ``wayline start``)."""
    max_step_args_bytes: int = 64 * MIB
    """``WAYLINE_MAX_STEP_ARGS_BYTES``: the arguments of one step call."""
    max_result_bytes: int = 64 * MIB
    """``WAYLINE_MAX_RESULT_BYTES``: a step's result, and a run's output. Over it the step
    fails with ``PAYLOAD_TOO_LARGE`` (its body is not run again)."""
    max_hook_payload_bytes: int = 64 * MIB
    """``WAYLINE_MAX_HOOK_PAYLOAD_BYTES``: a payload delivered to a hook."""
    inline_payload_bytes: int = 256 * 1024
    """``WAYLINE_INLINE_PAYLOAD_BYTES``: a payload (input, output, step arguments and result,
    hook payload and metadata) larger than this is stored out of line, and so is the largest
    of one append's payloads while they add up to more than twice this. 256 KiB keeps every
    event-log message well under NATS's default 1 MiB ``max_payload``; raise it only with the
    server's ``max_payload``."""
    max_error_bytes: int = 8 * 1024
    """``WAYLINE_MAX_ERROR_BYTES``: a recorded error's message is cut to this (an error must
    always be recordable, so it is shortened, never refused)."""

    event_loop: str = "asyncio"
    """``WAYLINE_LOOP``: the event loop of ``wayline`` commands (the worker's among them),
    ``asyncio`` or ``uvloop`` (``wayline.loops``; installed by ``wayline[uvloop]``). asyncio's
    own is the default because it needs nothing installed; docs/performance.md says what
    uvloop saves."""

    otel_env: Mapping[str, str] = field(default_factory=dict)
    """The standard ``OTEL_*`` variables (traces are exported when they ask for it; see
    ``wayline.telemetry``)."""

    extra: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # Checked here too, as tests and embedders build settings without the environment: a
        # delay under the floor hands a held delivery back in a hot loop while the pause's age
        # cannot be read, and one over the cap would change what the cap promises (a paused
        # run's step waits at most 30 s after it ends). A value that is not a number (a string
        # from a file, None) is refused by name too, not left to a comparison's TypeError.
        value = self.held_delay_seconds
        if not _seconds(value) or not HELD_DELAY_FLOOR <= value <= HELD_DELAY_MAX:
            raise ConfigurationError(
                f"held_delay_seconds must be a number of seconds from {HELD_DELAY_FLOOR:g} to"
                f" {HELD_DELAY_MAX:g}, got {value!r}"
            )

        prompt = self.prompt_wake_seconds
        if not _seconds(prompt) or not 0.0 <= prompt <= PROMPT_WAKE_MAX:
            raise ConfigurationError(
                "prompt_wake_seconds (WAYLINE_PROMPT_WAKE_SECONDS) must be a number of seconds"
                f" from 0 (off) to {PROMPT_WAKE_MAX:g}, got {prompt!r}"
            )

    @property
    def handoff_after(self) -> float:
        if self.handoff_seconds is not None:
            return self.handoff_seconds
        return self.max_invocation_seconds / 2

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        env = os.environ if env is None else env
        lease = _float(env, "WORKFLOW_INLINE_OWNERSHIP_LEASE_SECONDS", DEFAULT_LEASE_SECONDS)
        lease = min(MAX_LEASE_SECONDS, max(1.0, lease))
        return cls(
            inline_ownership=_flag(env, "WORKFLOW_INLINE_OWNERSHIP", True),
            lease_seconds=lease,
            max_queue_deliveries=max(1, int(_float(env, "WORKFLOW_MAX_QUEUE_DELIVERIES", 48))),
            replay_cache_runs=_count(env, "WAYLINE_REPLAY_CACHE_RUNS", 256, "runs"),
            max_inline_steps=min(16, max(1, int(_float(env, "WORKFLOW_MAX_INLINE_STEPS", 3)))),
            prompt_wake_seconds=_float(env, "WAYLINE_PROMPT_WAKE_SECONDS", 0.25),
            history_warn_events=_events(env, "WAYLINE_HISTORY_WARN_EVENTS", 10_240),
            history_limit_events=_events(env, "WAYLINE_HISTORY_LIMIT_EVENTS", 51_200),
            max_invocation_seconds=_float(env, "WAYLINE_MAX_INVOCATION_SECONDS", 800.0),
            handoff_seconds=_float(env, "WAYLINE_HANDOFF_SECONDS", 0.0) or None,
            visibility_seconds=max(0.5, _float(env, "WAYLINE_VISIBILITY_SECONDS", 30.0)),
            held_delay_seconds=_held_delay(env),
            poll_interval_seconds=max(0.001, _float(env, "WAYLINE_POLL_INTERVAL", 0.05)),
            definition_mismatch=_choice(env, "WAYLINE_DEFINITION_MISMATCH", ("wait", "fail")),
            event_loop=_choice(env, "WAYLINE_LOOP", ("asyncio", "uvloop")),
            world_url=env.get("WAYLINE_WORLD") or "sqlite:///.wayline/wayline.db",
            console_url=env.get("WAYLINE_CONSOLE_URL") or None,
            webhook_secrets=_secrets(env),
            nats_monitors=tuple(
                u.strip() for u in env.get("WAYLINE_NATS_MONITOR", "").split(",") if u.strip()
            ),
            operator_status_interval_seconds=_positive(
                env, "WAYLINE_OPERATOR_STATUS_INTERVAL_SECONDS", 1.0
            ),
            operator_patches_per_second=_positive(
                env, "WAYLINE_OPERATOR_PATCHES_PER_SECOND", 100.0
            ),
            operator_resync_seconds=_positive(env, "WAYLINE_OPERATOR_RESYNC_SECONDS", 300.0),
            operator_change_feed=(env.get("WAYLINE_OPERATOR_CHANGE_FEED") or "on").strip().lower()
            not in ("off", "0", "false", "no"),
            operator_api_threads=int(_positive(env, "WAYLINE_OPERATOR_API_THREADS", 16)),
            operator_sweep_seconds=_positive(env, "WAYLINE_OPERATOR_SWEEP_SECONDS", 60.0),
            operator_hook_retry_seconds=_positive(env, "WAYLINE_OPERATOR_HOOK_RETRY_SECONDS", 5.0),
            start_rearm_seconds=_not_negative(env, "WAYLINE_START_REARM_SECONDS", 60.0),
            otel_env={k: v for k, v in env.items() if k.startswith("OTEL_")},
            operator_identity=env.get("POD_ID") or None,
            operator_peering=env.get("WAYLINE_OPERATOR_PEERING") or None,
            operator_instance=env.get("WAYLINE_OPERATOR_INSTANCE") or None,
            operator_priority=_whole_or_none(env, "WAYLINE_OPERATOR_PRIORITY", *PRIORITY_RANGE),
            operator_peering_lifetime=_whole(
                env, "WAYLINE_OPERATOR_PEERING_LIFETIME", 60, *PEERING_LIFETIME_RANGE
            ),
            operator_schedule_seconds=_positive(env, "WAYLINE_OPERATOR_SCHEDULE_SECONDS", 10.0),
            schedule_clock_rate=_positive(env, "WAYLINE_SCHEDULE_CLOCK_RATE", 1.0),
            schedule_clock_origin=_float(env, "WAYLINE_SCHEDULE_CLOCK_ORIGIN", 0.0),
            operator_worker_seconds=_positive(env, "WAYLINE_OPERATOR_WORKER_SECONDS", 10.0),
            worker_version=(env.get("WAYLINE_WORKER_VERSION") or "").strip() or None,
            worker_draining=(env.get("WAYLINE_WORKER_DRAINING") or "").strip().lower()
            in ("1", "true", "yes", "on"),
            max_input_bytes=_size(env, "WAYLINE_MAX_INPUT_BYTES"),
            max_step_args_bytes=_size(env, "WAYLINE_MAX_STEP_ARGS_BYTES"),
            max_result_bytes=_size(env, "WAYLINE_MAX_RESULT_BYTES"),
            max_hook_payload_bytes=_size(env, "WAYLINE_MAX_HOOK_PAYLOAD_BYTES"),
            inline_payload_bytes=_size(env, "WAYLINE_INLINE_PAYLOAD_BYTES", 256 * 1024),
            max_error_bytes=_size(env, "WAYLINE_MAX_ERROR_BYTES", 8 * 1024),
        )

    def schedule_now(self) -> float:
        """The time schedules read (``schedule_clock_rate``): the runtime's clock, sped up
        from ``schedule_clock_origin`` in tests."""
        origin = self.schedule_clock_origin
        return origin + (clock.now() - origin) * self.schedule_clock_rate

    @property
    def limits(self) -> Limits:
        return Limits(
            input=self.max_input_bytes,
            step_args=self.max_step_args_bytes,
            result=self.max_result_bytes,
            hook_payload=self.max_hook_payload_bytes,
            error=self.max_error_bytes,
        )


def _flag(env: Mapping[str, str], name: str, default: bool) -> bool:
    raw = env.get(name)
    if raw is None or raw.strip() == "":
        return default
    value = raw.strip().lower()
    if value in ("0", "false", "no", "off"):
        return False
    if value in ("1", "true", "yes", "on"):
        return True
    raise ConfigurationError(f"{name} must be 0/1/true/false, got {raw!r}")


def _choice(env: Mapping[str, str], name: str, options: tuple[str, ...]) -> str:
    raw = (env.get(name) or options[0]).strip().lower()
    if raw not in options:
        raise ConfigurationError(f"{name} must be one of {', '.join(options)}, got {raw!r}")
    return raw


def _size(env: Mapping[str, str], name: str, default: int = 64 * MIB) -> int:
    value = _float(env, name, default)
    if not 1024 <= value <= 1 << 30:
        raise ConfigurationError(f"{name} must be a byte count from 1024 to 1 GiB, got {value:g}")
    return int(value)


def _float(env: Mapping[str, str], name: str, default: float) -> float:
    raw = env.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        return float(raw)
    except ValueError:
        raise ConfigurationError(f"{name} must be a number, got {raw!r}") from None


def _whole(env: Mapping[str, str], name: str, default: int, least: int, most: int) -> int:
    raw = env.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        number = float(raw)  # "60.0" as 60, as these settings were read before
    except ValueError:
        raise ConfigurationError(f"{name} must be a whole number, got {raw!r}") from None
    if not number.is_integer():  # NaN and inf too
        raise ConfigurationError(f"{name} must be a whole number, got {raw!r}")
    value = int(number)
    if not least <= value <= most:
        raise ConfigurationError(f"{name} must be {least} to {most}, got {raw!r}")
    return value


def _whole_or_none(env: Mapping[str, str], name: str, least: int, most: int) -> int | None:
    """``_whole`` with no default: unset (or empty) is None, and 0 is 0."""
    raw = env.get(name)
    if raw is None or raw.strip() == "":
        return None
    return _whole(env, name, 0, least, most)


def _events(env: Mapping[str, str], name: str, default: int) -> int:
    return _count(env, name, default, "events")


def _count(env: Mapping[str, str], name: str, default: int, what: str) -> int:
    raw = env.get(name)
    if raw is None or not raw.strip():
        return default
    try:
        value = int(raw)
    except ValueError:
        value = -1
    if value < 0:
        raise ConfigurationError(f"{name} must be 0 (off) or a number of {what}, got {raw!r}")
    return value


def _not_negative(env: Mapping[str, str], name: str, default: float) -> float:
    value = _float(env, name, default)
    if not value >= 0:
        raise ConfigurationError(f"{name} must be 0 or a number of seconds, got {value!r}")
    return value


def _positive(env: Mapping[str, str], name: str, default: float) -> float:
    value = _float(env, name, default)
    if not value > 0:
        raise ConfigurationError(f"{name} must be a positive number of seconds, got {value!r}")
    return value


def _held_delay(env: Mapping[str, str]) -> float:
    name = "WAYLINE_HELD_DELAY_SECONDS"
    value = _float(env, name, HELD_DELAY_MIN)
    if not HELD_DELAY_FLOOR <= value <= HELD_DELAY_MAX:
        raise ConfigurationError(
            f"{name} must be a number of seconds from {HELD_DELAY_FLOOR:g} to"
            f" {HELD_DELAY_MAX:g}, got {env[name]!r}"
        )
    return value


def _seconds(value: object) -> bool:
    """A number of seconds as code may give one: an int or a float, not a bool."""
    return isinstance(value, int | float) and not isinstance(value, bool)


def _secrets(env: Mapping[str, str]) -> tuple[str, ...]:
    """The webhook keys: the variable's, else its file's (a mounted Secret), one per line.
    A file that cannot be read is a configuration error, not an empty list: a console would
    otherwise refuse every webhook and a worker every ``webhook=True`` with a vaguer reason."""
    given = env.get("WAYLINE_WEBHOOK_SECRET")
    if given:
        return tuple(k.strip() for k in given.split(",") if k.strip())
    path = env.get("WAYLINE_WEBHOOK_SECRET_FILE")
    if not path:
        return ()
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except (OSError, UnicodeDecodeError) as err:
        raise ConfigurationError(
            f"WAYLINE_WEBHOOK_SECRET_FILE {path!r} cannot be read: {err}"
        ) from None
    return tuple(k.strip() for k in text.splitlines() if k.strip())


CODECS = ("auto", "json", "fast")
"""``WAYLINE_CODEC``: the JSON codec of the event log (``wayline._core.jsoncodec``): ``auto``
(the compiled codecs of ``wayline[fast]`` where installed, else the standard library's),
``json`` (the standard library's) or ``fast`` (the compiled ones, or an error). A process
has one codec for its life, so it is set here, when this module is imported, and not on a
``Settings`` object: every process that imports ``wayline`` has imported this module before
it encodes anything (docs/performance.md)."""


def _install_codec(env: Mapping[str, str]) -> None:
    name = _choice(env, "WAYLINE_CODEC", CODECS)
    try:
        jsoncodec.use(name)
    except ImportError as err:
        raise ConfigurationError(str(err)) from None


_install_codec(os.environ)
