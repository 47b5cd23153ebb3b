"""The ``WorkflowRun`` resource: its spec as a pydantic model, and the CRD generated from it.

``crds/`` holds the generated CRDs, checked in (``python -m wayline_operator crds`` writes
them; a test fails when they differ). The status is written by the operator only and mirrors
the run's log; the CRD keeps it open (``x-kubernetes-preserve-unknown-fields``) because kopf
stores its own progress there too; its fields still have a schema with descriptions, for
``kubectl explain``.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from wayline.start_options import (
    DEFAULT_PRIORITY,
    MAX_FAIRNESS_KEY_CHARS,
    MAX_PRIORITY,
    MIN_PRIORITY,
)

GROUP = "wayline.dev"
VERSION = "v1alpha1"
KIND = "WorkflowRun"
PLURAL = "workflowruns"
SHORT_NAMES = ["wfr"]


class CompensationSpec(BaseModel):
    """What a person decided for a run whose unwind is stuck (``phase: compensation_stuck``).
    Declarative, so a re-applied manifest repeats nothing."""

    model_config = ConfigDict(extra="forbid")

    resumes: int = Field(
        default=0,
        ge=0,
        description="Retry the stuck compensation until the run has recorded this many "
        "resumes (raise it by one to retry once more).",
    )
    abandon: bool = Field(
        default=False, description="Give up the unwind: the run ends failed (or cancelled)."
    )


class KeyRef(BaseModel):
    """One key of a ConfigMap or Secret in the resource's namespace."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, description="The ConfigMap's or Secret's name.")
    key: str = Field(min_length=1, description="The key whose value (JSON) is the input.")


class InputFrom(BaseModel):
    """Where the input is, for one too large for ``kubectl apply`` (its last-applied
    annotation holds at most 256 KiB): read once, when the run starts; the run keeps it."""

    model_config = ConfigDict(extra="forbid")

    configMapKeyRef: KeyRef | None = Field(
        default=None, description="A ConfigMap key (kubectl create configmap --from-file)."
    )
    secretKeyRef: KeyRef | None = Field(default=None, description="A Secret key.")

    @model_validator(mode="after")
    def _one(self) -> InputFrom:
        if (self.configMapKeyRef is None) == (self.secretKeyRef is None):
            raise ValueError("name one of configMapKeyRef or secretKeyRef")
        return self

    @property
    def ref(self) -> tuple[str, KeyRef]:
        """``("configmap" or "secret", its key ref)``."""
        if self.configMapKeyRef is not None:
            return "configmap", self.configMapKeyRef
        assert self.secretKeyRef is not None  # ``_one``
        return "secret", self.secretKeyRef


class WorkflowRunSpec(BaseModel):
    """One run of a registered workflow. Creating the resource starts exactly one run."""

    model_config = ConfigDict(extra="forbid")

    workflow: str = Field(
        min_length=1, description="The workflow's registered name (@wayline.workflow)."
    )
    input: Any = Field(
        default=None,
        description="The workflow's arguments, any JSON value. An array is the positional "
        "arguments ([1, 2] calls workflow(1, 2)); an object, string, number or boolean is the "
        'single argument ({"id": 7} calls workflow({"id": 7})); so a workflow taking one list '
        "is given [[1, 2]]. Omitted or null: no arguments. As `wayline start --input`.",
    )
    inputFrom: InputFrom | None = Field(
        default=None,
        description="The input's JSON from a ConfigMap or Secret key, instead of input (for "
        "an input too large for kubectl apply's annotation); read when the run starts.",
    )
    cancel: bool = Field(
        default=False, description="Ask the run to stop; its compensations (if any) run first."
    )
    paused: bool = Field(
        default=False,
        description="Pause the run: it starts no new step, child, hook or sleep (a step "
        "already running finishes) until this is set back to false, which unpauses a pause "
        "this field made (as `wayline runs pause` and `runs unpause`).",
    )
    terminate: bool = Field(
        default=False,
        description="Stop the run now, without running its compensations (as `temporal "
        "workflow terminate`); it ends cancelled. Cannot be undone.",
    )
    ttlSecondsAfterFinished: int | None = Field(
        default=None,
        ge=0,
        description="Delete this resource that many seconds after its run ended (as a Job's "
        "field). The run's history stays in the world, under the world's cleanup policy.",
    )
    priority: int | None = Field(
        default=None,
        ge=MIN_PRIORITY,
        le=MAX_PRIORITY,
        description=f"How soon the run's work is served among all ready work: {MIN_PRIORITY} "
        f"(first) to {MAX_PRIORITY}, {DEFAULT_PRIORITY} when omitted; work that waited is "
        "lifted one level a minute, so none starves (StartOptions(priority=), docs/sdk.md "
        '"Priority and fairness"). Read when the run starts.',
    )
    fairnessKey: str | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_FAIRNESS_KEY_CHARS,
        description="The tenant the run's work is served for: within a priority, the keys "
        "with ready work take turns, so one key's backlog does not hold another's back "
        "(StartOptions(fairness_key=)). Read when the run starts.",
    )
    compensation: CompensationSpec = Field(default_factory=lambda: CompensationSpec())

    @model_validator(mode="after")
    def _input_or_input_from(self) -> WorkflowRunSpec:
        if self.input is not None and self.inputFrom is not None:
            raise ValueError("give input or inputFrom, not both")
        return self

    def ordering(self) -> dict[str, Any]:
        """The ``StartOptions`` fields this spec sets of the run's ordering."""
        out: dict[str, Any] = {}
        if self.priority is not None:
            out["priority"] = self.priority
        if self.fairnessKey is not None:
            out["fairness_key"] = self.fairnessKey
        return out

    def args(self) -> list[Any]:
        if self.input is None:
            return []
        return list(self.input) if isinstance(self.input, list) else [self.input]


class WorkflowHookSpec(BaseModel):
    """A payload for the hook holding ``token``, delivered once: ``kubectl apply`` an
    approval. Immutable; a second payload is a second resource."""

    model_config = ConfigDict(extra="forbid")

    token: str = Field(min_length=1, description="The token the workflow's hook waits on.")
    payload: Any = Field(default=None, description="Any JSON value, given to the workflow.")
    buffer: str | None = Field(
        default=None,
        description="A duration (10m, 1h30m, at most 7d). While no hook holds the token, the "
        "payload is stored this long instead of waiting here, and the first hook a run of this "
        "namespace creates for the token receives it at once (phase waiting, reason Buffered, "
        "until then; failed once it expired untaken).",
    )


class WaitingFor(BaseModel):
    """One thing a live run waits for; ``kind`` says which fields are set."""

    kind: str = Field(
        description="person (a stuck unwind needs a decision), worker (no worker drives the "
        "run), concurrency (a slot of a concurrency limit, for the run or one of its steps), "
        "rate_limit (the next token of a rate limit, for the run or one of its steps), "
        "debounce (a debounced run's quiet period, until it begins), hook "
        "(a payload for token), child (a child run), sleep (until a time) or step "
        "(a step body in flight)."
    )
    message: str | None = Field(
        default=None,
        description="For person, worker, concurrency, rate_limit and debounce: what is going on.",
    )
    limit: str | None = Field(
        default=None,
        description="concurrency, rate_limit or debounce: the limit's key (workflow or step, "
        "and key).",
    )
    token: str | None = Field(default=None, description="hook: the token a WorkflowHook answers.")
    timeoutAt: str | None = Field(
        default=None, description="hook: when the hook times out, if it has a timeout."
    )
    hookId: str | None = Field(default=None, description="hook: its id in the run.")
    until: str | None = Field(
        default=None,
        description="sleep: when the run wakes; rate_limit: when its token is due; debounce: "
        "when the run begins unless started again.",
    )
    waitId: str | None = Field(default=None, description="sleep: its id in the run.")
    childId: str | None = Field(default=None, description="child: its id in the run.")
    deadlineAt: str | None = Field(
        default=None, description="child: when the parent stops waiting for it, if ever."
    )
    runId: str | None = Field(default=None, description="child: the child run's id.")
    workflow: str | None = Field(
        default=None, description="child or worker: the workflow it needs."
    )
    name: str | None = Field(
        default=None, description="step, or concurrency or rate_limit for a step: its name."
    )
    step: str | None = Field(default=None, description="person: the step whose reversal failed.")
    stepId: str | None = Field(
        default=None,
        description="step, person, or concurrency or rate_limit for a step: the step's id.",
    )
    attempt: int | None = Field(default=None, description="step: its latest attempt.")
    state: str | None = Field(default=None, description="step: pending, running or retrying.")
    error: str | None = Field(default=None, description="step or person: the last error.")


class LiveStep(BaseModel):
    """A created, non-terminal step as the operator's decision table saw it."""

    name: str | None = Field(default=None, description="The step's name.")
    stepId: str = Field(description="The step's id in the run.")
    attempt: int = Field(description="Its latest attempt (0: never started).")
    owner: str | None = Field(
        default=None, description="The message id that owns its inline execution, if any."
    )
    leaseRemainingSeconds: float = Field(
        description="How long the owner's lease still runs (0: lapsed, expired or unowned)."
    )
    backstopArmed: bool = Field(
        description="Whether the operator ensured a wake for it at its last reconcile."
    )
    action: str | None = Field(
        default=None, description="What the decision table said: arm_backstop or enqueue."
    )


class StepCounts(BaseModel):
    """Forward steps created, completed and failed; compensation steps apart."""

    created: int = Field(description="Forward steps created so far.")
    completed: int = Field(description="Forward steps completed.")
    failed: int = Field(description="Forward steps failed for good.")
    compensations: int | None = Field(
        default=None, description="Compensation steps created (an unwind's), not counted above."
    )
    live: list[LiveStep] | None = Field(
        default=None, description="Each created, non-terminal step, with its lease."
    )


class Condition(BaseModel):
    """A condition as Kubernetes API conventions (KEP-1623) have it."""

    type: str = Field(
        description="Succeeded, Progressing, Blocked (runs); Delivered (hooks); Ready (schedules)."
    )
    status: str = Field(description="True, False or Unknown.")
    reason: str = Field(description="A CamelCase reason (the phase, or why it is blocked).")
    message: str = Field(description="A human-readable message.")
    observedGeneration: int | None = Field(
        default=None, description="The metadata.generation this condition was computed for."
    )
    lastTransitionTime: str | None = Field(
        default=None, description="When status last changed (not when it was last written)."
    )


class WorkflowRunStatus(BaseModel):
    """Written by the operator only: a mirror of the run's event log in the world (kopf keeps
    its own keys beside these)."""

    runId: str | None = Field(default=None, description="The run's id in the world.")
    instance: str | None = Field(
        default=None,
        description="The operator instance that started the run and writes this status "
        "(the label wayline.dev/instance names a resource's owner).",
    )
    world: str | None = Field(
        default=None, description="The world that holds the run (its URL, no credentials)."
    )
    workflow: str | None = Field(default=None, description="The workflow the run runs.")
    priority: int | None = Field(
        default=None, description="The priority the run's work is served at (as it started)."
    )
    fairnessKey: str | None = Field(
        default=None, description="The fairness key (tenant) the run's work is served for."
    )
    phase: str | None = Field(
        default=None,
        description="pending, running, blocked (held: waiting for a slot of a concurrency "
        "limit or a rate limit's next token, for a worker of the definition the run "
        "pinned, or after a replay "
        "divergence; the message says which), paused (by a person or spec.paused, or by a step "
        "out of attempts with on_exhausted=pause; nothing new starts until unpaused), "
        "compensating, compensation_stuck (a person decides), completed, failed, cancelled, "
        "continued_as_new (the run went on in a next run: wayline.continue_as_new), "
        "corrupt (a log entry cannot be read), or invalid (the spec started nothing). The "
        "run's own status words, as `wayline runs list`.",
    )
    message: str | None = Field(default=None, description="What is happening, for a person.")
    lastSeq: int | None = Field(
        default=None, description="The last event of the run's log this status reflects."
    )
    observedGeneration: int | None = Field(
        default=None, description="The metadata.generation this status was computed for."
    )
    steps: StepCounts | None = None
    progress: str | None = Field(default=None, description="Steps completed / created.")
    waitingFor: list[WaitingFor] | None = Field(
        default=None, description="What the live run waits for, most actionable first."
    )
    waitingForSummary: str | None = Field(
        default=None, description="The first of waitingFor, short (the WAITING-FOR column)."
    )
    compensationResumes: int | None = Field(
        default=None, description="Resumes of a stuck compensation recorded in the log."
    )
    createdAt: str | None = Field(default=None, description="When the run was created.")
    startedAt: str | None = Field(default=None, description="When a worker started it.")
    endedAt: str | None = Field(default=None, description="When it ended.")
    duration: str | None = Field(
        default=None,
        description="From start to end, once the run ended (the Started column's age says "
        "how long a live run has run).",
    )
    output: Any = Field(default=None, description="The workflow's return value (completed).")
    error: Any = Field(
        default=None, description="code, message and name of the error (failed, cancelled)."
    )
    conditions: list[Condition] | None = Field(
        default=None, description="Succeeded, Progressing and Blocked."
    )


class WorkflowHookStatus(BaseModel):
    """Written by the operator only."""

    phase: str | None = Field(
        default=None,
        description="waiting (no hook holds the token yet), delivered, or failed (the "
        "hook or its run ended, the payload was refused, or the run was not started in "
        "this namespace).",
    )
    runId: str | None = Field(default=None, description="The run the payload went to.")
    message: str | None = Field(default=None, description="Why it waits or failed.")
    observedGeneration: int | None = Field(
        default=None, description="The metadata.generation the status was written for."
    )
    conditions: list[Condition] | None = Field(
        default=None,
        description="Delivered: True once the payload reached its run; False while waiting "
        "(WaitingForHook, or Buffered: spec.buffer stored the payload for the hook to come) "
        "or for good (Refused, or WrongNamespace: the run waiting on the "
        "token was not started in this namespace).",
    )


HOOK_KIND = "WorkflowHook"
HOOK_PLURAL = "workflowhooks"


def _structural(schema: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    """A pydantic JSON schema as a Kubernetes structural schema: refs inlined, no titles,
    ``Any`` as preserved unknown fields."""
    if "$ref" in schema:
        target = defs[schema["$ref"].rsplit("/", 1)[-1]]
        schema = {**target, **{k: v for k, v in schema.items() if k != "$ref"}}
    options = schema.get("anyOf")
    if options and {"type": "null"} in options:  # Optional[X]: X, nullable
        rest = [o for o in options if o != {"type": "null"}]
        if len(rest) == 1:
            merged = {**{k: v for k, v in schema.items() if k != "anyOf"}, **rest[0]}
            return {**_structural(merged, defs), "nullable": True}
        schema = {k: v for k, v in schema.items() if k != "anyOf"}
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key in ("title", "additionalProperties", "$defs"):
            continue
        if key == "properties":
            out[key] = {name: _structural(sub, defs) for name, sub in value.items()}
        elif key == "items":
            out[key] = _structural(value, defs)
        else:
            out[key] = value
    if "type" not in out and "properties" not in out:
        out["x-kubernetes-preserve-unknown-fields"] = True
    elif "properties" in out:
        out.setdefault("type", "object")
    return out


def _schema(model: type[BaseModel]) -> dict[str, Any]:
    raw = model.model_json_schema()
    schema = _structural(raw, raw.get("$defs", {}))
    for prop in schema["properties"].values():
        if prop.get("default", 0) is None or "properties" in prop:
            prop.pop("default", None)  # no null defaults; objects default in the operator
    return schema


def status_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The status, described for ``kubectl explain``; open, as kopf writes beside it."""
    raw = model.model_json_schema()
    schema = _structural(raw, raw.get("$defs", {}))
    _drop_null_defaults(schema)
    schema["x-kubernetes-preserve-unknown-fields"] = True
    return schema


def _drop_null_defaults(schema: dict[str, Any]) -> None:
    schema.pop("default", None)
    for sub in schema.get("properties", {}).values():
        _drop_null_defaults(sub)
    if isinstance(schema.get("items"), dict):
        _drop_null_defaults(schema["items"])


def run_spec_schema() -> dict[str, Any]:
    schema = _schema(WorkflowRunSpec)
    props = schema["properties"]
    # Unknown fields are kept, not pruned, so that the admission policy (``input_policy``)
    # sees a typo and refuses it for every client. Pruned, a client that asks for no strict
    # field validation (the Python client, kubectl --validate=false) had ``inputs:`` dropped
    # in silence and its run started with no input; only kubectl's default refused it. A CRD
    # rule cannot list the keys of an object its schema types (``self.all(k, ...)`` does not
    # compile there). Without the policy the operator refuses them (``phase: invalid``).
    schema["x-kubernetes-preserve-unknown-fields"] = True
    props["compensation"]["x-kubernetes-preserve-unknown-fields"] = True
    _drop_null_defaults(props["inputFrom"])  # a null default would set the absent key
    props["inputFrom"]["x-kubernetes-preserve-unknown-fields"] = True
    props["inputFrom"]["x-kubernetes-validations"] = [
        {
            "rule": "has(self.configMapKeyRef) != has(self.secretKeyRef)",
            "message": "name one of configMapKeyRef or secretKeyRef",
        }
    ]
    props["workflow"]["x-kubernetes-validations"] = [
        {"rule": "self == oldSelf", "message": "a run's workflow cannot change"}
    ]
    props["cancel"]["x-kubernetes-validations"] = [
        {"rule": "self || !oldSelf", "message": "a cancelled run cannot be un-cancelled"}
    ]
    props["terminate"]["x-kubernetes-validations"] = [
        {"rule": "self || !oldSelf", "message": "a terminated run cannot be un-terminated"}
    ]
    return schema


def hook_spec_schema() -> dict[str, Any]:
    schema = _schema(WorkflowHookSpec)
    schema["x-kubernetes-preserve-unknown-fields"] = True  # refused by ``input_policy``
    schema["x-kubernetes-validations"] = [
        {"rule": "self == oldSelf", "message": "a delivered payload cannot change"}
    ]
    return schema


def _crd(
    kind: str,
    plural: str,
    short: str,
    spec: dict[str, Any],
    columns: list[dict[str, Any]],
    status: dict[str, Any],
) -> dict[str, Any]:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{GROUP}"},
        "spec": {
            "group": GROUP,
            "scope": "Namespaced",
            "names": {
                "kind": kind,
                "plural": plural,
                "singular": kind.lower(),
                "shortNames": [short],
                "categories": ["wayline"],
            },
            "versions": [
                {
                    "name": VERSION,
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "additionalPrinterColumns": columns,
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "required": ["spec"],
                            "properties": {
                                "spec": spec,
                                "status": status,
                            },
                        }
                    },
                }
            ],
        },
    }


def crd_manifest() -> dict[str, Any]:
    """The ``WorkflowRun`` CRD."""
    columns: list[dict[str, Any]] = [
        {"name": "Workflow", "type": "string", "jsonPath": ".spec.workflow"},
        {"name": "Phase", "type": "string", "jsonPath": ".status.phase"},
        {
            "name": "Steps",
            "type": "string",
            "jsonPath": ".status.progress",
            "description": "steps completed / created so far",
        },
        {"name": "Waiting-For", "type": "string", "jsonPath": ".status.waitingForSummary"},
        # Dates, not a duration string: kubectl computes their ages at every `get`, so a run
        # that waits shows its time running growing with no status write (a string was
        # written only when the run moved, and froze in between).
        {
            "name": "Started",
            "type": "date",
            "jsonPath": ".status.startedAt",
            "description": "when a worker started the run",
        },
        {
            "name": "Ended",
            "type": "date",
            "jsonPath": ".status.endedAt",
            "description": "when the run ended",
        },
        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
        {
            "name": "Duration",
            "type": "string",
            "jsonPath": ".status.duration",
            "priority": 1,
            "description": "from start to end, once the run ended",
        },
        {"name": "Run", "type": "string", "jsonPath": ".status.runId", "priority": 1},
        {
            "name": "Priority",
            "type": "integer",
            "description": "0 is served first",
            "jsonPath": ".status.priority",
            "priority": 1,
        },
        {"name": "Tenant", "type": "string", "jsonPath": ".status.fairnessKey", "priority": 1},
        {"name": "Message", "type": "string", "jsonPath": ".status.message", "priority": 1},
    ]
    status = status_schema(WorkflowRunStatus)
    return _crd(KIND, PLURAL, SHORT_NAMES[0], run_spec_schema(), columns, status)


def hook_crd_manifest() -> dict[str, Any]:
    """The ``WorkflowHook`` CRD."""
    columns: list[dict[str, Any]] = [
        {"name": "Token", "type": "string", "jsonPath": ".spec.token"},
        {"name": "Phase", "type": "string", "jsonPath": ".status.phase"},
        {"name": "Run", "type": "string", "jsonPath": ".status.runId"},
        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
        {"name": "Message", "type": "string", "jsonPath": ".status.message", "priority": 1},
    ]
    status = status_schema(WorkflowHookStatus)
    return _crd(HOOK_KIND, HOOK_PLURAL, "wfh", hook_spec_schema(), columns, status)


INPUT_POLICY = "wayline-workflowrun-input"
HOOK_POLICY = "wayline-workflowhook-fields"
SCHEDULE_POLICY = "wayline-workflowschedule-fields"
WORKER_POLICY = "wayline-workflowworker-fields"


def _unchanged(field: str) -> str:
    new, old = f"object.spec.{field}", f"oldObject.spec.{field}"
    return f"has({new}) == has({old}) && (!has({new}) || {new} == {old})"


INPUT_UNCHANGED = f"{_unchanged('input')} && {_unchanged('inputFrom')}"


def _known(model: type[BaseModel]) -> str:
    return json.dumps(sorted(model.model_fields))


def _only_known(path: str, model: type[BaseModel]) -> dict[str, Any]:
    """A validation refusing any field of the object at ``path`` (under ``object.``) that
    ``model`` does not have, naming them and the known ones."""
    known = _known(model)
    target = f"object.{path}"
    guard = "" if path == "spec" else f"!has({target}) || "
    return {
        "expression": f"{guard}{target}.all(k, k in {known})",
        "messageExpression": f"'unknown field(s) in {path}: ' + "
        f"{target}.filter(k, !(k in {known})).join(', ') + "
        f"' (known: {', '.join(sorted(model.model_fields))})'",
        "reason": "Invalid",
    }


def input_policy() -> dict[str, Any]:
    """A run keeps the input it started with, so an edited ``spec.input`` is refused; and a
    spec with a field the resource does not have (a typo: ``inputs``) is refused at its
    creation and at any update, whatever the client; a WorkflowHook's too (``payloads:``
    would have delivered no payload), a WorkflowSchedule's (``schedul:`` or ``inputs:``
    started a schedule without it), and a WorkflowWorker's (``minReplica:`` ran its default).
    A CRD rule can do neither: it cannot read the untyped field (``self.input`` does not
    compile), nor list a typed object's keys; a
    ValidatingAdmissionPolicy (Kubernetes 1.30+) evaluates the stored object as it is. The
    policies and their bindings as one ``List``, applied with the CRDs."""
    run = [
        _only_known("spec", WorkflowRunSpec),
        _only_known("spec.compensation", CompensationSpec),
        _only_known("spec.inputFrom", InputFrom),
        {
            "expression": "!has(object.spec.input) || !has(object.spec.inputFrom)",
            "message": "give spec.input or spec.inputFrom, not both",
            "reason": "Invalid",
        },
        {
            "expression": f"request.operation != 'UPDATE' || ({INPUT_UNCHANGED})",
            "message": "a run's input cannot change: it started with the "
            "input it has; start another WorkflowRun for another input",
            "reason": "Invalid",
        },
    ]
    hook = [_only_known("spec", WorkflowHookSpec)]
    from .schedule_resource import SCHEDULE_PLURAL, WorkflowScheduleSpec

    schedule = [_only_known("spec", WorkflowScheduleSpec)]
    from .worker_resource import WORKER_PLURAL, WorkflowWorkerSpec

    worker = [_only_known("spec", WorkflowWorkerSpec)]
    return {
        "apiVersion": "v1",
        "kind": "List",
        "items": [
            *_policy(INPUT_POLICY, PLURAL, run),
            *_policy(HOOK_POLICY, HOOK_PLURAL, hook),
            *_policy(SCHEDULE_POLICY, SCHEDULE_PLURAL, schedule),
            *_policy(WORKER_POLICY, WORKER_PLURAL, worker),
        ],
    }


def _policy(name: str, plural: str, validations: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A ValidatingAdmissionPolicy on creations and updates of ``plural``, and its binding."""
    return [
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicy",
            "metadata": {"name": name},
            "spec": {
                "failurePolicy": "Fail",
                "matchConstraints": {
                    "resourceRules": [
                        {
                            "apiGroups": [GROUP],
                            "apiVersions": ["*"],
                            "operations": ["CREATE", "UPDATE"],
                            "resources": [plural],
                        }
                    ]
                },
                "validations": validations,
            },
        },
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicyBinding",
            "metadata": {"name": name},
            "spec": {"policyName": name, "validationActions": ["Deny"]},
        },
    ]


def crds() -> dict[str, dict[str, Any]]:
    """Every CRD, by the file name it is checked in under (in ``crds/``), and the admission
    policy that keeps a run's input."""
    from .peering import peering_crds
    from .schedule_resource import SCHEDULE_PLURAL, schedule_crd_manifest
    from .worker_resource import WORKER_PLURAL, worker_crd_manifest

    return {
        f"{PLURAL}.{GROUP}.json": crd_manifest(),
        f"{HOOK_PLURAL}.{GROUP}.json": hook_crd_manifest(),
        f"{SCHEDULE_PLURAL}.{GROUP}.json": schedule_crd_manifest(),
        f"{WORKER_PLURAL}.{GROUP}.json": worker_crd_manifest(),
        "kopf-peering.json": peering_crds(),  # for more than one operator replica
        f"{PLURAL}-input-policy.json": input_policy(),  # not a CRD: applied with them
    }


def as_json(manifest: dict[str, Any]) -> str:
    """A manifest as the checked-in files hold it (JSON is YAML; kubectl applies it as is)."""
    return json.dumps(manifest, indent=2, sort_keys=True) + "\n"
