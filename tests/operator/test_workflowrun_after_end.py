"""A WorkflowRun whose run ended and then went on, on a real kube-apiserver, both worlds: a
failed run redriven in place (``wayline runs redrive``) is mirrored live again and then
completed, and a run that continued as new is followed to its chain's last run."""

from __future__ import annotations

from pathlib import Path

import wayline
from tests.operator.test_workflowrun import Cluster, cluster, crd_applied  # noqa: F401
from tests.runtime import continue_as_new_flows, fork_flows
from tests.runtime.flows import mark
from tests.runtime.harness import settings
from tests.runtime.test_redrive import _unbreak


async def test_a_redriven_run_is_mirrored_again_until_it_completes(
    cluster: Cluster,  # noqa: F811
    tmp_path: Path,
) -> None:
    path = str(tmp_path / "marks")
    mark(path + ".broken")
    async with wayline.Worker(cluster.world, [fork_flows.order], settings=settings()):
        made = cluster.apply("redriven", {"workflow": "fork_flows.order", "input": [path]})
        assert made.returncode == 0, made.stderr
        failed = await cluster.status_when("redriven", "failed")
        _unbreak(path)
        await cluster.client.redrive(failed["runId"], "the card was fixed", by="ops")
        done = await cluster.status_when("redriven", "completed")
    assert done["runId"] == failed["runId"]
    assert done["output"][-1] == "shipped"


async def test_a_workflowrun_follows_its_run_through_continue_as_new(
    cluster: Cluster,  # noqa: F811
) -> None:
    """The resource's name is its run's business id, whose next generation the continued run
    is: the resource follows the chain to its last run and ends with that run's result."""
    async with wayline.Worker(
        cluster.world, [continue_as_new_flows.can_counter], settings=settings()
    ):
        cluster.apply("counter", {"workflow": "can_counter", "input": [1, 0, 3]})
        try:
            done = await cluster.status_when("counter", "completed")
        except AssertionError:
            raise AssertionError(str(cluster.get("counter").get("status"))) from None
    assert done["output"] == {"n": 3, "total": 6}
    last = await cluster.client.get_run(done["runId"])
    assert last.continued_from is not None
    [succeeded] = [c for c in done["conditions"] if c["type"] == "Succeeded"]
    assert succeeded["status"] == "True"
