"""The ``WorkflowRun`` resource: its spec as a pydantic model, and the CRD generated from it.

``crds/`` holds the generated CRDs, checked in (``python -m wayline_operator crds`` writes
them; a test fails when they differ). The status is written by the operator only and mirrors
the run's log; the CRD keeps it open (``x-kubernetes-preserve-unknown-fields``) because kopf
stores its own progress there too.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

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


class WorkflowRunSpec(BaseModel):
    """One run of a registered workflow. Creating the resource starts exactly one run."""

    model_config = ConfigDict(extra="forbid")

    workflow: str = Field(
        min_length=1, description="The workflow's registered name (@wayline.workflow)."
    )
    input: Any = Field(
        default=None,
        description="A JSON array is the positional arguments; any other value is the single "
        "argument (as `wayline start --input`).",
    )
    cancel: bool = Field(
        default=False, description="Ask the run to stop; its compensations (if any) run first."
    )
    compensation: CompensationSpec = Field(default_factory=lambda: CompensationSpec())

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


HOOK_KIND = "WorkflowHook"
HOOK_PLURAL = "workflowhooks"


def _structural(schema: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    """A pydantic JSON schema as a Kubernetes structural schema: refs inlined, no titles,
    ``Any`` as preserved unknown fields."""
    if "$ref" in schema:
        target = defs[schema["$ref"].rsplit("/", 1)[-1]]
        schema = {**target, **{k: v for k, v in schema.items() if k != "$ref"}}
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


def run_spec_schema() -> dict[str, Any]:
    schema = _schema(WorkflowRunSpec)
    props = schema["properties"]
    props["workflow"]["x-kubernetes-validations"] = [
        {"rule": "self == oldSelf", "message": "a run's workflow cannot change"}
    ]
    props["cancel"]["x-kubernetes-validations"] = [
        {"rule": "self || !oldSelf", "message": "a cancelled run cannot be un-cancelled"}
    ]
    return schema


def hook_spec_schema() -> dict[str, Any]:
    schema = _schema(WorkflowHookSpec)
    schema["x-kubernetes-validations"] = [
        {"rule": "self == oldSelf", "message": "a delivered payload cannot change"}
    ]
    return schema


def _crd(
    kind: str, plural: str, short: str, spec: dict[str, Any], columns: list[dict[str, Any]]
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
                                "status": {
                                    "type": "object",
                                    "x-kubernetes-preserve-unknown-fields": True,
                                },
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
        {"name": "Steps", "type": "integer", "jsonPath": ".status.steps.completed"},
        {"name": "Run", "type": "string", "jsonPath": ".status.runId", "priority": 1},
        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
    ]
    return _crd(KIND, PLURAL, SHORT_NAMES[0], run_spec_schema(), columns)


def hook_crd_manifest() -> dict[str, Any]:
    """The ``WorkflowHook`` CRD."""
    columns: list[dict[str, Any]] = [
        {"name": "Token", "type": "string", "jsonPath": ".spec.token"},
        {"name": "Phase", "type": "string", "jsonPath": ".status.phase"},
        {"name": "Run", "type": "string", "jsonPath": ".status.runId"},
        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
    ]
    return _crd(HOOK_KIND, HOOK_PLURAL, "wfh", hook_spec_schema(), columns)


def crds() -> dict[str, dict[str, Any]]:
    """Every CRD, by the file name it is checked in under (in ``crds/``)."""
    return {
        f"{PLURAL}.{GROUP}.json": crd_manifest(),
        f"{HOOK_PLURAL}.{GROUP}.json": hook_crd_manifest(),
    }


def as_json(manifest: dict[str, Any]) -> str:
    """A manifest as the checked-in files hold it (JSON is YAML; kubectl applies it as is)."""
    return json.dumps(manifest, indent=2, sort_keys=True) + "\n"
