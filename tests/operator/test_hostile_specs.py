"""The operator and hostile specs: a WorkflowSchedule whose name leaves no room for its runs'
names or whose time zone names a region (``Europe``) is an ``InvalidSpec`` (a condition and a
Warning Event), not a failing timer."""

from __future__ import annotations

import json
from pathlib import Path

from tests.operator.test_workflowrun import Cluster
from tests.operator.test_workflowschedule import (  # noqa: F401
    _schedule,
    cluster,
    schedule_crds,
)


async def test_a_schedule_named_too_long_for_its_runs_is_invalid(
    cluster: Cluster,  # noqa: F811
    tmp_path: Path,
) -> None:
    name = "s" * 250  # a valid name (253 at most), but `<name>-<minute>` is not
    manifest = {
        "apiVersion": "wayline.dev/v1alpha1",
        "kind": "WorkflowSchedule",
        "metadata": {"name": name},
        "spec": _schedule(),
    }
    path = tmp_path / "long.json"  # not named after it: a file name has 255 bytes at most
    path.write_text(json.dumps(manifest))
    done = cluster.kubectl("apply", "-f", str(path), check=False)
    assert done.returncode == 0, done.stderr
    event = await cluster.event_when(name, "InvalidSpec")
    assert "metadata.name" in event["message"] and event["type"] == "Warning"
    ready = cluster.get(name, "wfs")["status"]["conditions"][0]
    assert (ready["status"], ready["reason"]) == ("False", "InvalidSpec")
    assert "Traceback" not in cluster.operator.log.read_text()


async def test_a_region_for_a_time_zone_is_invalid(cluster: Cluster) -> None:  # noqa: F811
    """``timeZone: Europe`` (a folder of the zone database, not a zone) failed every tick."""
    done = cluster.apply("region", _schedule(timeZone="Europe"), "WorkflowSchedule")
    assert done.returncode == 0, done.stderr
    event = await cluster.event_when("region", "InvalidSpec")
    assert "unknown time zone 'Europe'" in event["message"]
    assert "Traceback" not in cluster.operator.log.read_text()
