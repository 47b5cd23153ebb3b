"""The Wayline operator: reconciles ``WorkflowRun`` resources against a Wayline world.

It starts runs, mirrors their status, carries cancellations and compensation decisions to
the world, and sweeps for runs that have no wake coming. It never runs user code: worker pods
do. Run it with ``python -m wayline_operator`` (kopf underneath).
"""

from .resource import GROUP, KIND, PLURAL, VERSION, WorkflowRunSpec, crd_manifest

__all__ = ["GROUP", "KIND", "PLURAL", "VERSION", "WorkflowRunSpec", "crd_manifest"]
