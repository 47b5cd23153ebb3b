"""The day-2 walkthrough of docs/day2.md done as a person does it, with kubectl only, on a real
kube-apiserver + etcd with the operator in its own process, on SQLite and on NATS: find runs
by their search attributes with a label selector, pause and unpause a run from its spec, and
send a hook's payload before the run that waits for it exists.

Each step checks what kubectl prints (its table, not only the JSON behind it). With
``WAYLINE_TRANSCRIPT=path`` set, the commands and their output are also written to that file,
which is how the transcript in docs/day2.md was made."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import wayline
from tests.operator.test_attribute_labels import labelled_order
from tests.operator.test_workflowrun import (  # noqa: F401 - fixtures
    APPS,
    Cluster,
    cluster,
    crd_applied,
)
from tests.runtime.harness import settings, wait_for


class Transcript:
    """The kubectl commands of one walkthrough and what each printed."""

    def __init__(self, on: Cluster) -> None:
        self.on = on
        self.lines: list[str] = []

    def run(self, *args: str) -> str:
        done = self.on.kubectl(*args)
        self.lines.append("$ kubectl " + " ".join(args))
        self.lines.extend(done.stdout.rstrip("\n").splitlines())
        self.lines.append("")
        out: str = done.stdout
        return out

    def save(self, world: str) -> None:
        target = os.environ.get("WAYLINE_TRANSCRIPT")
        if target:
            with Path(target).open("a") as out:
                out.write(f"# world: {world}\n" + "\n".join(self.lines) + "\n")


def _rows(table: str) -> dict[str, list[str]]:
    """kubectl's table by the first column (NAME), the header row left out."""
    lines = table.strip().splitlines()
    return {line.split()[0]: line.split() for line in lines[1:]}


async def test_a_person_finds_pauses_and_answers_runs_with_kubectl(
    cluster: Cluster,  # noqa: F811
) -> None:
    said = Transcript(cluster)
    world = "nats" if "nats" in os.environ.get("WAYLINE_WORLD", "") else "local"
    async with wayline.Worker(cluster.world, [*APPS, labelled_order], settings=settings()):
        # 1. Search attributes: the runs of one tenant, by a label selector.
        for name, tenant in (("acme-7", "acme"), ("globex-3", "globex")):
            made = cluster.apply(name, {"workflow": "labelled_order", "input": [tenant]})
            assert made.returncode == 0, made.stderr
        for name in ("acme-7", "globex-3"):
            await cluster.status_when(name, "completed")

        async def labelled() -> bool:
            found = await asyncio.to_thread(
                cluster.kubectl, "get", "wfr", "-l", "attributes.wayline.dev/tenant", "-o", "name"
            )
            return len(found.stdout.split()) == 2

        await wait_for(labelled, timeout=20, interval=0.3)
        acme = _rows(said.run("get", "wfr", "-l", "attributes.wayline.dev/tenant=acme"))
        assert list(acme) == ["acme-7"] and "completed" in acme["acme-7"]
        vip = said.run("get", "wfr", "-l", "attributes.wayline.dev/vip=true", "-o", "name")
        assert sorted(vip.split()) == [
            "workflowrun.wayline.dev/acme-7",
            "workflowrun.wayline.dev/globex-3",
        ]

        # 2. Pause: a run waiting on a hook is paused from its spec, keeps a payload sent
        # meanwhile, and takes it up once unpaused.
        cluster.apply("approval-9", {"workflow": "kid_waits", "input": "tok-approval-9"})
        await cluster.status_when("approval-9", "running")
        await cluster.client.wait_for_hook("tok-approval-9", timeout=20)
        said.run("patch", "wfr", "approval-9", "--type=merge", "-p", '{"spec":{"paused":true}}')
        await cluster.status_when("approval-9", "paused")
        await cluster.event_when("approval-9", "Paused")
        assert "paused" in _rows(said.run("get", "wfr", "approval-9"))["approval-9"]
        reasons = said.run(
            "get",
            "events",
            "--field-selector",
            "involvedObject.name=approval-9",
            "-o",
            "custom-columns=TYPE:.type,REASON:.reason,MESSAGE:.message",
        )
        assert "Paused" in reasons
        await cluster.client.resume_hook("tok-approval-9", {"approved": True})
        said.run("patch", "wfr", "approval-9", "--type=merge", "-p", '{"spec":{"paused":false}}')
        done = await cluster.status_when("approval-9", "completed")
        assert done["output"] == {"approved": True}
        assert "completed" in _rows(said.run("get", "wfr", "approval-9"))["approval-9"]

        # 3. A payload before the wait: the WorkflowHook is applied before any run waits on its
        # token; the run applied afterwards receives it at once.
        early = {"token": "tok-refund-4", "payload": {"approved": False}, "buffer": "10m"}
        assert cluster.apply("refund-4-answer", early, "WorkflowHook").returncode == 0
        await cluster.status_when("refund-4-answer", "waiting", kind="workflowhook")
        said.run("get", "workflowhook", "refund-4-answer")
        cluster.apply("refund-4", {"workflow": "kid_waits", "input": "tok-refund-4"})
        got = await cluster.status_when("refund-4", "completed")
        await cluster.status_when("refund-4-answer", "delivered", kind="workflowhook")
        assert got["output"] == {"approved": False}
        hooks = _rows(said.run("get", "workflowhook", "refund-4-answer"))
        assert "delivered" in hooks["refund-4-answer"]
        said.run("get", "wfr", "refund-4")
    said.save(world)
