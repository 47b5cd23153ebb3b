"""The ``WorkflowWorker`` resource: the pods that serve some workflow modules, deployed as one
Deployment per version (image, apps, env) so that a deploy never strands a run pinned to a
definition only the old version serves. Its spec and status as pydantic models, and the CRD
generated from them (``resource.crds`` lists it)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from .resource import Condition, _crd, _schema, status_schema

WORKER_KIND = "WorkflowWorker"
WORKER_PLURAL = "workflowworkers"


class WorkflowWorkerSpec(BaseModel):
    """Run ``wayline worker`` for ``apps`` in ``image``. A change of image, apps or env is a
    new version (a Deployment beside the old ones); an old version stays while a live run is
    pinned to a definition identity only it serves."""

    model_config = ConfigDict(extra="forbid")

    image: str = Field(min_length=1, description="The workers' container image.")
    apps: list[str] = Field(
        min_length=1, description="The modules of workflows and steps (wayline worker --app)."
    )
    minReplicas: int = Field(
        default=1,
        ge=0,
        description="The current version's fewest replicas (0 only counts with scaleToZero).",
    )
    maxReplicas: int = Field(
        default=1,
        ge=1,
        description="The current version's most replicas, however deep its backlog.",
    )
    scaleToZero: bool = Field(
        default=False,
        description="The current version has no pod while it has no backlog and no live run; "
        "the first message brings one back.",
    )
    backlogPerReplica: int = Field(
        default=10,
        ge=1,
        description="Ready messages one replica is expected to keep up with: the current "
        "version runs ceil(backlog / backlogPerReplica) replicas, within the bounds.",
    )
    cooldownSeconds: int = Field(
        default=60,
        ge=0,
        description="Seconds after a scaling before the replicas go down again (up is at once).",
    )
    scaleUpLeadSeconds: int | None = Field(
        default=None,
        ge=0,
        description="Seconds ahead that the current version counts its delayed messages (a "
        "sleeping run's wake, a retry's backoff) as load, so that it is scaled up before they "
        "fall due rather than after; unset: cooldownSeconds.",
    )
    resources: dict[str, Any] | None = Field(
        default=None, description="The worker container's resources (requests, limits)."
    )
    env: dict[str, str] = Field(
        default_factory=dict, description="Extra environment of the worker container."
    )
    imagePullPolicy: str | None = Field(default=None, description="The container's pull policy.")
    retire: list[str] = Field(
        default_factory=list,
        description="Versions to delete whether or not their runs drained (a version whose runs "
        "can never end); their runs are shown as blocked, naming the version.",
    )
    template: dict[str, Any] | None = Field(
        default=None,
        description="A pod template (metadata, spec) for everything else (probes, volumes, "
        "security); its container named worker gets the image, the --app arguments and env.",
    )

    @property
    def lead_seconds(self) -> int:
        """How far ahead delayed messages count as load: ``scaleUpLeadSeconds``, else the
        cooldown, the time a version scaled up is kept anyway, so a wave brought up for is
        not scaled down before it falls due."""
        return self.cooldownSeconds if self.scaleUpLeadSeconds is None else self.scaleUpLeadSeconds


class WorkerVersion(BaseModel):
    """One version's row of the status."""

    name: str = Field(description="The version: a hash of image, apps and env.")
    image: str | None = Field(default=None, description="Its image.")
    identities: list[str] | None = Field(
        default=None, description="The definition identities its workers were seen to serve."
    )
    pinnedRuns: int | None = Field(
        default=None, description="Live runs pinned to an identity only this version serves."
    )
    replicas: int | None = Field(default=None, description="Its Deployment's replicas.")
    readyReplicas: int | None = Field(default=None, description="Of those, ready.")
    state: str | None = Field(
        default=None, description="Current, Draining (kept for its runs) or Retired."
    )
    topics: list[str] | None = Field(
        default=None, description="The queue topics its workers consume (its backlog's)."
    )
    blockedRuns: list[str] | None = Field(
        default=None, description="Retired: some of the runs no worker will drive."
    )


class WorkflowWorkerStatus(BaseModel):
    """Written by the operator only."""

    current: str | None = Field(default=None, description="The version the spec describes.")
    versions: list[WorkerVersion] | None = Field(default=None, description="Every version kept.")
    versionCount: int | None = Field(default=None, description="How many versions are kept.")
    readyReplicas: int | None = Field(default=None, description="Ready pods of every version.")
    pinnedRuns: int | None = Field(
        default=None, description="Live runs that only an old version serves."
    )
    backlog: int | None = Field(default=None, description="The current version's ready messages.")
    inFlight: int | None = Field(
        default=None,
        description=(
            "The current version's messages held by its workers (steps under way); a message "
            "waiting out a delay (a retry backoff, a slot or rate-limit wait) is not counted."
        ),
    )
    dueSoon: int | None = Field(
        default=None,
        description="The current version's delayed messages that fall due within "
        "scaleUpLeadSeconds: counted as load before they are ready.",
    )
    selector: str | None = Field(
        default=None, description="The label selector of the current version's pods."
    )
    lastScaleTime: str | None = Field(default=None, description="When replicas last changed.")
    observedGeneration: int | None = Field(
        default=None, description="The metadata.generation this status was computed for."
    )
    conditions: list[Condition] | None = Field(default=None, description="Ready.")


def worker_crd_manifest() -> dict[str, Any]:
    """The ``WorkflowWorker`` CRD."""
    columns: list[dict[str, Any]] = [
        {"name": "Current", "type": "string", "jsonPath": ".status.current"},
        {"name": "Versions", "type": "integer", "jsonPath": ".status.versionCount"},
        {"name": "Ready", "type": "integer", "jsonPath": ".status.readyReplicas"},
        {"name": "Pinned", "type": "integer", "jsonPath": ".status.pinnedRuns"},
        {"name": "Backlog", "type": "integer", "jsonPath": ".status.backlog", "priority": 1},
        {"name": "DueSoon", "type": "integer", "jsonPath": ".status.dueSoon", "priority": 1},
        {"name": "Image", "type": "string", "jsonPath": ".spec.image", "priority": 1},
        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
    ]
    spec = _schema(WorkflowWorkerSpec)
    # Unknown fields are kept, not pruned, so that the admission policy refuses a typo for
    # every client (``resource.input_policy``), and the operator too where it is not applied.
    spec["x-kubernetes-preserve-unknown-fields"] = True
    for field in ("resources", "template"):
        spec["properties"][field] = {
            "type": "object",
            "x-kubernetes-preserve-unknown-fields": True,
            "description": spec["properties"][field].get("description", ""),
        }
    return _crd(
        WORKER_KIND, WORKER_PLURAL, "wfw", spec, columns, status_schema(WorkflowWorkerStatus)
    )
